"""The reader's language (docs/RULES.md "Rendering at read time"): a read's locale, the alert catalogues,
and locale-aware numbers and country names, all from Babel.

Catalogues: `translations/<locale>/LC_MESSAGES/alerts.po` are the sources (in the repo); `make` compiles them to
`.mo` (gitignored). One message per alert code, keyed `alert.<code>` (see `message_key`): the English text is
the en catalogue's msgstr, so rewording an English template never orphans its French translation, and
completeness is a set comparison of codes (tests/test_i18n.py). A second domain, `pages.po`, holds the words of
the pages and read models (the share page, the weather words), keyed by the registry of trips/readmodels/words.py
and read through `t`, with the same fallbacks. A `.mo` that is missing or older than its
`.po` (a checkout where `make` has not run yet) is replaced by the `.po` read in memory, with a warning: the
text shown is the source's, never a stale compile.

App-wide infrastructure (trips/core): the account pages (oauth/) and every reader use it.

Resolution (`current_locale`): a locale pinned for this request (the share page pins the trip owner's), else
the signed-in account's (REST and MCP: g.principal), else on REST the request's Accept-Language negotiated
among LOCALES (the answer then varies on it, RFC 9110 §12.5.5), else English.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

from babel import Locale, negotiate_locale
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal
from flask import after_this_request, g, has_request_context, request

log = logging.getLogger(__name__)

LOCALES = ("en", "fr")
DEFAULT = "en"
DOMAIN = "alerts"
PAGES = "pages"  # the words of the pages: `t`
TRANSLATIONS = Path(__file__).resolve().parents[2] / "translations"
_PINNED = "btp.locale"  # in the request's environ: one request's choice, never another's (g may outlive it)


def message_key(code: str) -> str:
    """The catalogue key of an alert code."""
    return f"alert.{code}"


def normalize(locale: str | None) -> str | None:
    """`locale` when it is one of LOCALES (case-insensitive, "fr-CH"/"fr_CH" → "fr"), else None."""
    if not isinstance(locale, str):
        return None
    base = locale.replace("_", "-").split("-", 1)[0].strip().lower()
    return base if base in LOCALES else None


def _paths(locale: str, domain: str = DOMAIN) -> tuple[Path, Path]:
    folder = TRANSLATIONS / locale / "LC_MESSAGES"
    return folder / f"{domain}.po", folder / f"{domain}.mo"


def is_fresh(locale: str, domain: str = DOMAIN) -> bool:
    """True when the compiled catalogue of `locale` (and `domain`) exists and is not older than its source."""
    po, mo = _paths(locale, domain)
    return mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime


@lru_cache(maxsize=4 * len(LOCALES))
def messages(locale: str, domain: str = DOMAIN) -> dict[str, str]:
    """{msgid: msgstr} of `locale`'s catalogue of `domain` (the alerts unless told), untranslated entries left
    out. Raises FileNotFoundError when the locale has no `.po` source."""
    po, mo = _paths(locale, domain)
    if is_fresh(locale, domain):
        with mo.open("rb") as handle:
            catalog = read_mo(handle)
    else:
        log.warning("i18n: %s is missing or older than its source: reading %s (run `make`)", mo.name, po)
        with po.open("rb") as handle:
            catalog = read_po(handle, locale=locale)
    return {m.id: m.string for m in catalog if m.id and isinstance(m.id, str) and m.string}


def template(code: str, locale: str) -> str | None:
    """The message template of an alert code in `locale` (English when the locale lacks it), None when
    neither catalogue has it."""
    key = message_key(code)
    return messages(normalize(locale) or DEFAULT).get(key) or messages(DEFAULT).get(key)


def t(key: str, locale: str | None, **params) -> str:
    """The page word `key` (pages.po) in `locale`, English when the locale lacks it, the key itself when neither
    catalogue has it (a test keeps that from shipping); `params` fill its {fields} (str.format): format numbers
    with `number` first."""
    text = messages(normalize(locale) or DEFAULT, PAGES).get(key) or messages(DEFAULT, PAGES).get(key) or key
    return text.format(**params) if params else text


def number(value, locale: str, digits: int = 1) -> str:
    """A number as `locale` writes it, at most `digits` decimals, trailing zeros dropped: 1.5 → "1.5" / "1,5",
    1200 → "1,200" / "1 200" (fr groups with a narrow no-break space, CLDR)."""
    return _number(value, normalize(locale) or DEFAULT, digits)


@lru_cache(maxsize=8192, typed=True)
def _number(value, locale: str, digits: int) -> str:
    # Babel's format_decimal parses the pattern and looks the locale up on every call (~0.1 ms): a trip's
    # alerts format the same few hundred numbers on every read, so the words are remembered (a pure function).
    pattern = "#,##0" + ("." + "#" * digits if digits else "")
    return format_decimal(value, format=pattern, locale=locale)


def country(iso: str | None, locale: str) -> str | None:
    """The name of an ISO 3166-1 alpha-2 code in `locale` (CLDR territories: "CH" → "Switzerland" /
    "Suisse"), the code itself when unknown, None for None."""
    if iso is None:
        return None
    return Locale.parse(normalize(locale) or DEFAULT).territories.get(str(iso).upper(), iso)


def pin(locale: str | None) -> None:
    """Render this request in `locale` (the share page: the trip owner's). Needs a request context."""
    request.environ[_PINNED] = normalize(locale) or DEFAULT


def current_locale() -> str:
    """The locale this read is rendered in (see the module docstring); English outside a request."""
    if not has_request_context():
        return DEFAULT
    pinned = request.environ.get(_PINNED)
    if pinned:
        return pinned
    principal = g.get("principal")
    chosen = normalize(getattr(principal, "locale", None))
    if chosen:
        return chosen
    if not request.path.startswith("/api/"):
        return DEFAULT
    offered = [value for value, _ in request.accept_languages]
    found = negotiate_locale([v.replace("-", "_") for v in offered], list(LOCALES), sep="_") if offered else None
    # negotiate_locale matches exact tags only; "fr-CH" with no "fr" fallback listed still means French.
    found = found or next((n for n in map(normalize, offered) if n), None)

    @after_this_request
    def _vary(response):
        response.vary.add("Accept-Language")
        return response

    request.environ[_PINNED] = found or DEFAULT  # one answer per request, and the Vary added once
    return found or DEFAULT
