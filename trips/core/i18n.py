"""The reader's language (docs/RULES.md "Rendering at read time"): a read's locale, the catalogues, and numbers,
dates and country names the locale's way, all from Babel.

Catalogues (`translations/<locale>/LC_MESSAGES/<domain>.po`, compiled by `make`), one per surface: `alerts` (one
entry per alert code, `template`), `pages` (the pages and e-mails), `messages` (what REST and MCP both say:
refusals, field messages, nextAction, the read models' words), `mcp` (what only MCP says: tool answers, argument
refusals, digest lines) and `api` (what only REST says: problem titles, the HTTP layer's refusals). The last four
are keyed (the msgid is a key, the English text the en msgstr) and share one key space: `say` renders a Msg (a key
and values, trips/errors.py) from whichever holds the key; `t` and `tn` are `say` of a key. A missing or stale
`.mo` is replaced by its `.po`, with a warning. tests/trips/core/test_catalogues.py holds the catalogues whole.

Resolution (`current_locale`): a locale pinned for this request (the share page: its owner's), else the account's
(REST and MCP: g.principal; the pages: the session's, through `account_locale`), else (not on /mcp) the request's
Accept-Language (`accepted`: q-values, q=0 refused; the answer then varies on it), else English.
"""
from __future__ import annotations

import gettext
import logging
import string
from datetime import date as Date
from datetime import timezone
from functools import lru_cache
from pathlib import Path

from babel import Locale
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from babel.dates import format_date, format_time
from babel.messages.plurals import get_plural
from babel.numbers import format_decimal, get_currency_symbol
from flask import after_this_request, g, has_request_context, request

from trips.errors import Msg, N_, Plural

log = logging.getLogger(__name__)

LOCALES = ("en", "fr")
DEFAULT = "en"
DOMAIN = "alerts"
PAGES = "pages"  # the words of the pages and e-mails
MESSAGES = "messages"  # what REST and MCP both say: refusals, field messages, nextAction, the read models' words
MCP = "mcp"  # what only MCP says: tool answers, argument refusals, digest lines
API = "api"  # what only REST says: problem titles and the HTTP layer's refusals
KEYED = (PAGES, MESSAGES, MCP, API)  # one key space: `t`, `tn` and `say` find a key in whichever holds it
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


@lru_cache(maxsize=4 * len(LOCALES))
def keyed(locale: str) -> dict[str, str | tuple[str, ...]]:
    """{key: text} of every keyed catalogue of `locale` (KEYED): a key is in one of them only (a test holds it)."""
    merged: dict = {}
    for domain in KEYED:
        merged.update(messages(locale, domain))
    return merged


def say(text: Msg | str, locale: str | None) -> str:
    """`text` (a Msg, or a bare key) in `locale`: its entry in the keyed catalogues (KEYED), English when the locale
    lacks it, the key itself when neither has it (a test keeps that from shipping). A Plural takes the form of its
    count by the language's gettext Plural-Forms ({count} is filled with it unless a value gives it). The {fields}
    are filled (str.format) with the values written the reader's way (see `said`) when there are values."""
    text = text if isinstance(text, Msg) else Msg(text)
    chosen = normalize(locale) or DEFAULT
    found, lang = None, chosen
    for lang in dict.fromkeys((chosen, DEFAULT)):
        found = keyed(lang).get(text.key)
        if found is not None and (text.count is None or isinstance(found, tuple)):
            break
    else:
        found = None
    values = text.values
    if text.count is not None:
        found = pick(found, lang, text.count) if isinstance(found, tuple) else (found or text.key)
        values = {"count": text.count, **values}
    elif found is None:
        found = text.key
    template = found[0] if isinstance(found, tuple) else found
    if not values:
        return template
    return template.format(**{name: said(values[name], chosen) for name in _fields(template) if name in values})


@lru_cache(maxsize=4096)
def _fields(template: str) -> frozenset[str]:
    """The {fields} a template fills (a catalogue holds a few hundred templates: parsed once each)."""
    return frozenset(name for _, name, _, _ in string.Formatter().parse(template) if name)


def said(value, locale: str) -> str:
    """A value of a text as `locale` writes it: a Msg rendered, a number grouped and with its decimal sign (an
    int whole, a float with at most two decimals: round it first), a date with its month in words, a list or tuple
    of them joined with ", ", anything else as str()."""
    if isinstance(value, Msg):
        return say(value, locale)
    if isinstance(value, bool) or not isinstance(value, (int, float, Date, list, tuple)):
        return str(value)
    if isinstance(value, int):
        return number(value, locale, 0)
    if isinstance(value, float):
        return number(value, locale, 2)
    if isinstance(value, Date):
        return date(value, locale)
    return ", ".join(said(item, locale) for item in value)


def join(texts, locale: str | None, separator: str | None = None) -> str:
    """`texts` (Msgs or keys) rendered in `locale` and joined by the catalogue's `separator` key (a space when
    None), the empty ones left out."""
    between = say(separator, locale) if separator else " "
    return between.join(said for said in (say(text, locale) for text in texts) if said)


def capital(text: str) -> str:
    """`text` with its first letter in capitals (a phrase made the start of a sentence)."""
    return text[:1].upper() + text[1:]


def t(key: str, locale: str | None, **params) -> str:
    """The words `key` in `locale` (`say` of a Msg): English when the locale lacks them, the key itself when no
    catalogue has it; `params` fill its {fields}."""
    return say(Msg(key, **params), locale)


def tn(key: str, count: int, locale: str | None, **params) -> str:
    """The words `key` with plural forms (a `msgid_plural` entry), the form of `count` in `locale` chosen by
    gettext's Plural-Forms of that language ("1 conseil" / "2 conseils", fr counts 0 as singular), English when
    the locale lacks it, the key itself when neither has it. `{count}` is filled with `count` written the locale's
    way unless `params` give it."""
    return say(Plural(key, count, **params), locale)


@lru_cache(maxsize=len(LOCALES))
def _plural_rule(locale: str):
    return gettext.c2py(get_plural(locale).plural_expr)


def plural_index(locale: str, count: float) -> int:
    """Which plural form (msgstr[i]) `count` takes in `locale`: the language's gettext Plural-Forms, from Babel's
    table (the one `pybabel init` writes into a catalogue's header)."""
    return _plural_rule(normalize(locale) or DEFAULT)(abs(int(count)))


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


def currency(code: str | None, locale: str | None) -> str | None:
    """An ISO 4217 code as `locale` writes it beside an amount (CLDR: "EUR" → "€", "USD" → "$" / "$US", "CHF" →
    "CHF"), None for None: a price always says its money, never converted."""
    if not code:
        return None
    return get_currency_symbol(str(code).upper(), normalize(locale) or DEFAULT)


def pin(locale: str | None) -> None:
    """Render this request in `locale` (the share page: the trip owner's). Needs a request context."""
    request.environ[_PINNED] = normalize(locale) or DEFAULT


def account_locale(resolver) -> None:
    """Register how a page request finds its signed-in account's chosen locale (oauth's web edge: the session's
    account); `resolver()` answers a locale or None."""
    _ACCOUNT["locale"] = resolver


def register(app) -> None:
    """Give every template the reader's words: `t(key, **params)`, `tn(key, count, **params)`, `num(value,
    digits)`, `currency(code)`, `date(value)`, `clock(value)`, `osm(tag, value)` (`osm_word`), `error_words(status)` and `lang`, all in
    `current_locale()` (the share page's pinned owner's included)."""

    @app.context_processor
    def _page_words():
        locale = current_locale()
        return {"lang": locale, "t": lambda key, **params: t(key, locale, **params),
                "tn": lambda key, count, **params: tn(key, count, locale, **params),
                "num": lambda value, digits=1: number(value, locale, digits),
                "currency": lambda code: currency(code, locale),
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
        request.environ[_PINNED] = chosen  # one answer per request: read again, the account may need a query
        return chosen
    if principal is None and _ACCOUNT["locale"] is not None and not request.path.startswith(_MACHINE):
        chosen = normalize(_ACCOUNT["locale"]())
        if chosen:
            request.environ[_PINNED] = chosen
            return chosen
    if request.path.startswith("/mcp"):  # an agent's answers: the account's language, else English
        if principal is not None:
            request.environ[_PINNED] = DEFAULT
        return DEFAULT
    found = accepted(list(request.accept_languages))

    @after_this_request
    def _vary(response):
        response.vary.add("Accept-Language")
        return response

    request.environ[_PINNED] = found or DEFAULT  # one answer per request, and the Vary added once
    return found or DEFAULT


def accepted(ranges: list[tuple[str, float]]) -> str | None:
    """The locale of LOCALES an Accept-Language header's (range, q) pairs prefer (RFC 9110 §12.5.4), None when
    none is acceptable. A locale's weight is its own range's ("fr"), else its best subtag range's ("fr-CH"), else
    the wildcard's ("*"); q=0 means "not this one", so `*;q=0, fr;q=0` accepts neither. Ties go to the range
    listed first."""
    weights = {}
    for locale in LOCALES:
        weights[locale] = _weight(locale, [(v.strip().lower(), q, i) for i, (v, q) in enumerate(ranges)])
    acceptable = {locale: w for locale, w in weights.items() if w[0] > 0}
    return min(acceptable, key=lambda locale: (-acceptable[locale][0], acceptable[locale][1])) if acceptable else None


def _weight(locale: str, ranges: list[tuple[str, float, int]]) -> tuple[float, int]:
    """(q, position in the header) of `locale` among lower-cased `ranges`: its own range's, else its best subtag
    range's, else the wildcard's, else (0, 0)."""
    for matches in ([r for r in ranges if r[0] == locale],
                    sorted((r for r in ranges if r[0] != locale and normalize(r[0]) == locale), key=lambda r: -r[1]),
                    [r for r in ranges if r[0] == "*"]):
        if matches:
            return matches[0][1], matches[0][2]
    return 0, 0


Msg.english = staticmethod(lambda text: say(text, DEFAULT))  # str(Msg): English, for logs and the CLI
