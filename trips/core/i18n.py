"""The reader's language (docs/RULES.md "Rendering at read time"): the locale of a read, the catalogues in
translations/ (`alerts.po`, one `alert.<code>` per alert; `pages.po`, the words of pages, mails and read models,
through `t` and `tn`) and numbers, dates and country names written the locale's way, all from Babel. `register`
gives every template the same words.
"""
from __future__ import annotations

import gettext
import logging
from datetime import timezone
from functools import lru_cache
from pathlib import Path

from babel import Locale, negotiate_locale
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from babel.dates import format_date, format_time
from babel.messages.plurals import get_plural
from babel.numbers import format_decimal
from flask import after_this_request, g, has_request_context, request

log = logging.getLogger(__name__)

LOCALES = ("en", "fr")
DEFAULT = "en"
DOMAIN = "alerts"
PAGES = "pages"  # the words of the pages: `t`
TRANSLATIONS = Path(__file__).resolve().parents[2] / "translations"
_PINNED = "btp.locale"  # in the request's environ: one request's choice, never another's (g may outlive it)
_MACHINE = ("/api/", "/mcp", "/.well-known/")  # answered for a token's principal, never a session's account
_ACCOUNT = {"locale": None}  # the pages' signed-in account's locale: a callable set by `account_locale`


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
def messages(locale: str, domain: str = DOMAIN) -> dict[str, str | tuple[str, ...]]:
    """{msgid: msgstr} of `locale`'s catalogue of `domain` (the alerts unless told), untranslated entries left
    out; an entry with plural forms is {singular msgid: (form 0, form 1, …)}. A `.mo` missing or older than its
    `.po` is replaced by the `.po`, with a warning: never a stale compile. Raises FileNotFoundError when the locale
    has no `.po` source."""
    po, mo = _paths(locale, domain)
    if is_fresh(locale, domain):
        with mo.open("rb") as handle:
            catalog = read_mo(handle)
    else:
        log.warning("i18n: %s is missing or older than its source: reading %s (run `make`)", mo.name, po)
        with po.open("rb") as handle:
            catalog = read_po(handle, locale=locale)
    found: dict[str, str | tuple[str, ...]] = {
        m.id: m.string for m in catalog if isinstance(m.id, str) and m.id and isinstance(m.string, str) and m.string}
    plural = {m.id[0]: tuple(m.string) for m in catalog
              if isinstance(m.id, (tuple, list)) and m.id[0] and m.string and all(m.string)}
    return found | plural


def template(code: str, locale: str, count=None) -> str | None:
    """The message template of an alert code in `locale` (English when the locale lacks it), None when
    neither catalogue has it. An entry with plural forms gives the form of `count` (the fact's `count`
    parameter) by the Plural-Forms of the language whose catalogue answered."""
    key = message_key(code)
    for lang in dict.fromkeys((normalize(locale) or DEFAULT, DEFAULT)):
        found = messages(lang).get(key)
        if found:
            return found if isinstance(found, str) else pick(found, lang, count)
    return None


def pick(forms: tuple[str, ...], locale: str, count) -> str:
    """The plural form of `count` among `forms` in `locale`; the last (the general plural) when the count is
    not a number."""
    if isinstance(count, bool) or not isinstance(count, (int, float)):
        return forms[-1]
    return forms[min(plural_index(locale, count), len(forms) - 1)]


def t(key: str, locale: str | None, **params) -> str:
    """The page word `key` (pages.po) in `locale`, English when the locale lacks it, the key itself when neither
    catalogue has it (a test keeps that from shipping); `params` fill its {fields} (str.format): format numbers
    with `number` first."""
    text = messages(normalize(locale) or DEFAULT, PAGES).get(key) or messages(DEFAULT, PAGES).get(key) or key
    text = text[0] if isinstance(text, tuple) else text
    return text.format(**params) if params else text


def tn(key: str, count: int, locale: str | None, **params) -> str:
    """The page words `key` with plural forms (pages.po `msgid_plural`), the form of `count` in `locale` chosen
    by gettext's Plural-Forms of that language ("1 conseil" / "2 conseils", fr counts 0 as singular), English when
    the locale lacks it, the key itself when neither has it. `{count}` is filled with `count` written the locale's
    way unless `params` give it."""
    chosen = normalize(locale) or DEFAULT
    for lang in dict.fromkeys((chosen, DEFAULT)):
        forms = messages(lang, PAGES).get(key)
        if isinstance(forms, tuple):
            text = pick(forms, lang, count)
            break
    else:
        text = key
    return text.format(**{"count": number(count, chosen, 0), **params})


@lru_cache(maxsize=len(LOCALES))
def _plural_rule(locale: str):
    return gettext.c2py(get_plural(locale).plural_expr)


def plural_index(locale: str, count: float) -> int:
    """Which plural form (msgstr[i]) `count` takes in `locale`: the language's gettext Plural-Forms, from Babel's
    table (the one `pybabel init` writes into a catalogue's header)."""
    return _plural_rule(normalize(locale) or DEFAULT)(abs(int(count)))


def N_(key: str) -> str:  # noqa: N802 (gettext's name for a key marked, not yet rendered)
    """`key` itself: marks a page key for extraction where it is named before it is rendered (babel.cfg)."""
    return key


# The words of an error page (templates/error.html) by HTTP status: a heading and what to do; any other status
# has the general pair. Never the error's own detail: it is English, and written for programs.
ERRORS = {
    400: (N_("error.bad_request"), N_("error.bad_request_detail")),
    404: (N_("error.not_found"), N_("error.not_found_detail")),
    405: (N_("error.not_allowed"), N_("error.not_allowed_detail")),
    413: (N_("error.too_large"), N_("error.too_large_detail")),
    429: (N_("error.rate_limited"), N_("error.rate_limited_detail")),
    503: (N_("error.unavailable"), N_("error.unavailable_detail")),
}
OTHER_ERROR = (N_("error.other"), N_("error.other_detail"))


def error_words(status) -> tuple[str, str]:
    """The page keys (heading, detail) of an error page for HTTP `status` (any value: unknown ones get the
    general pair)."""
    return ERRORS.get(status, OTHER_ERROR) if isinstance(status, int) else OTHER_ERROR


def osm_word(tag: str, value, locale: str | None) -> str | None:
    """An OpenStreetMap value in words (`osm_word("surface", "paving_stones", "fr")` → "pavés"), from the
    catalogue's `osm.<tag>.<value>` entries; None for a value the catalogue does not name: it is left out,
    never shown raw in a sentence."""
    key = f"osm.{tag}.{value}"
    return t(key, locale) if isinstance(value, str) and key in messages(DEFAULT, PAGES) else None


def osm_words(tag: str, values, locale: str | None) -> str:
    """OSM values joined with ", " (an alert's `surface`: "gravel, unpaved") in words: the ones the catalogue names,
    the others left out; when none is named, `osm.<tag>.other` ("other surfaces")."""
    said = [osm_word(tag, v.strip(), locale) for v in str(values).split(",")]
    return ", ".join(dict.fromkeys(w for w in said if w)) or t(f"osm.{tag}.other", locale)


def date(value, locale: str | None) -> str:
    """A calendar date as `locale` writes it, month in words: "2 Jun 2026" / "2 juin 2026"."""
    return format_date(value, "d MMM y", locale=normalize(locale) or DEFAULT)


def clock(value, locale: str | None) -> str:
    """The time of day of a naive UTC datetime (as BTP stores them) as `locale` writes it, in UTC: "2:05 PM" /
    "14:05". The pages name the zone: no script runs under their Content-Security-Policy to learn the browser's."""
    return format_time(value.replace(tzinfo=timezone.utc), "short", tzinfo=timezone.utc,
                       locale=normalize(locale) or DEFAULT)


def number(value, locale: str, digits: int = 1) -> str:
    """A number as `locale` writes it, at most `digits` decimals, trailing zeros dropped: 1.5 → "1.5" / "1,5",
    1200 → "1,200" / "1 200" (fr groups with a narrow no-break space, CLDR)."""
    return _number(value, normalize(locale) or DEFAULT, digits)


@lru_cache(maxsize=8192, typed=True)
def _number(value, locale: str, digits: int) -> str:
    # Babel parses the pattern and looks the locale up on every call, and a trip's alerts format the same few
    # hundred numbers on every read: a pure function, remembered.
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


def account_locale(resolver) -> None:
    """Register how a page request finds its signed-in account's chosen locale (oauth's web edge: the session's
    account); `resolver()` answers a locale or None."""
    _ACCOUNT["locale"] = resolver


def register(app) -> None:
    """Give every template the reader's words: `t(key, **params)`, `tn(key, count, **params)`, `num(value,
    digits)`, `date(value)`, `clock(value)`, `osm(tag, value)` (`osm_word`), `error_words(status)` and `lang`, all in
    `current_locale()` (the share page's pinned owner's included)."""

    @app.context_processor
    def _page_words():
        locale = current_locale()
        return {"lang": locale, "t": lambda key, **params: t(key, locale, **params),
                "tn": lambda key, count, **params: tn(key, count, locale, **params),
                "num": lambda value, digits=1: number(value, locale, digits),
                "date": lambda value: date(value, locale), "clock": lambda value: clock(value, locale),
                "osm": lambda tag, value: osm_word(tag, value, locale), "error_words": error_words}


def current_locale() -> str:
    """The locale this read is rendered in (docs/RULES.md "Rendering at read time"); English outside a request."""
    if not has_request_context():
        return DEFAULT
    pinned = request.environ.get(_PINNED)
    if pinned:
        return pinned
    principal = g.get("principal")
    chosen = normalize(getattr(principal, "locale", None))
    if chosen:
        return chosen
    if principal is None and _ACCOUNT["locale"] is not None and not request.path.startswith(_MACHINE):
        chosen = normalize(_ACCOUNT["locale"]())
        if chosen:
            request.environ[_PINNED] = chosen
            return chosen
    if request.path.startswith("/mcp"):  # an agent's answers: the account's language, else English
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
