"""What a night costs, in its own currency (docs/RULES.md "Accommodations", "Prices"): the map's own price, in the
currency it names or the country's, else an estimate by lodging type and stars from the table of the country's
region, in that region's currency. A country without a table has no estimate (`NO_BASIS`), a price whose currency
cannot be told none either (`NO_CURRENCY`): a price is never made up, nor converted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from babel.numbers import get_territory_currencies, list_currencies

NO_BASIS = "no_basis"  # no table for the country (or no country): no estimate
NO_CURRENCY = "no_currency"  # the map's own price, in a currency BTP cannot tell

# Typical ranges a night by lodging type, in the region's own currency; an unknown type is priced as a hotel.
# (currency, brackets by type, brackets of a hotel by stars 1 to 5.)
REGIONS = {
    "eurozone_west": ("EUR", {
        "camp_site": (8.0, 25.0), "hostel": (20.0, 35.0), "alpine_hut": (25.0, 45.0), "chalet": (30.0, 70.0),
        "guest_house": (40.0, 80.0), "hotel": (50.0, 120.0), "wilderness_hut": (0.0, 10.0),
    }, {1: (35.0, 70.0), 2: (50.0, 100.0), 3: (70.0, 140.0), 4: (110.0, 220.0), 5: (180.0, 450.0)}),
    "switzerland": ("CHF", {
        "camp_site": (15.0, 40.0), "hostel": (35.0, 60.0), "alpine_hut": (40.0, 80.0), "chalet": (50.0, 120.0),
        "guest_house": (70.0, 140.0), "hotel": (100.0, 220.0), "wilderness_hut": (0.0, 20.0),
    }, {1: (70.0, 120.0), 2: (90.0, 160.0), 3: (130.0, 250.0), 4: (200.0, 400.0), 5: (350.0, 900.0)}),
    "great_britain": ("GBP", {
        "camp_site": (10.0, 25.0), "hostel": (20.0, 40.0), "alpine_hut": (25.0, 45.0), "chalet": (40.0, 90.0),
        "guest_house": (50.0, 100.0), "hotel": (60.0, 140.0), "wilderness_hut": (0.0, 10.0),
    }, {1: (40.0, 80.0), 2: (55.0, 110.0), 3: (75.0, 150.0), 4: (110.0, 230.0), 5: (200.0, 500.0)}),
}
REGION_OF = {**dict.fromkeys(("FR", "BE", "NL", "LU", "DE", "AT", "IT", "ES", "PT", "IE"), "eurozone_west"),
             "CH": "switzerland", "LI": "switzerland", "GB": "great_britain"}
BACKPACK_CAMP_SHARE = 0.6  # a camp site taking backpackers or tents tops out at this share of its bracket's top
STARS_FLOOR, STARS_STEP, STARS_MAX_LIFT = 2, 0.25, 0.75   # a starred camp site: its floor lifted
STARRED_TYPES = frozenset({"hostel", "chalet", "guest_house"})   # beside hotels and unknown types

PRICE_NUMBER = re.compile(r"(\d+(?:[.,]\d+)?)")
STARS_NUMBER = re.compile(r"^\s*(\d+(?:[.,]\d+)?)")
CURRENCY_CODE = re.compile(r"\b([A-Z]{3})\b")
CURRENCY_SIGNS = {"€": "EUR", "£": "GBP"}  # "$" and "kr" name several currencies: the country's then
FREE_FEES = frozenset({"no", "false"})


@dataclass(frozen=True)
class Price:
    low: float | None
    high: float | None
    exact: bool
    currency: str | None  # ISO 4217
    reason: str | None = None  # NO_BASIS or NO_CURRENCY when there is no price


def number(value: str | None, pattern: re.Pattern = PRICE_NUMBER) -> float | None:
    m = pattern.search(value or "") if pattern is PRICE_NUMBER else pattern.match(value or "")
    return float(m.group(1).replace(",", ".")) if m else None


def currency_of(country: str | None) -> str | None:
    """The ISO 4217 currency a country pays in today (Babel's CLDR data), or None."""
    if not country:
        return None
    try:
        found = get_territory_currencies(country.upper())
    except Exception:  # noqa: BLE001 (an unknown territory: no currency)
        return None
    return found[0] if found else None


def is_currency(code: object) -> bool:
    """Whether `code` is an ISO 4217 code Babel knows (upper case)."""
    return isinstance(code, str) and code in list_currencies()


def named_currency(value: str | None) -> str | None:
    """The currency a price tag names ("15 EUR", "€ 12", "CHF 20"), or None."""
    text = value or ""
    for sign, code in CURRENCY_SIGNS.items():
        if sign in text:
            return code
    m = CURRENCY_CODE.search(text)
    return m.group(1) if m and is_currency(m.group(1)) else None


def stars(tags: dict) -> float | None:
    """The leading number of `stars` (`4`, `3S` → 3), or None."""
    return number(tags.get("stars"), STARS_NUMBER)


def price(kind: str, tags: dict, country: str | None) -> Price:
    """A lodging's price a night: a number in `charge` (else `fee`) is exact, in the currency it names, else the
    country's (none: NO_CURRENCY); `fee=no` is free; otherwise its region's bracket for the type (none: NO_BASIS),
    a backpack/tent camp site capped lower; stars give a hotel (or an unknown type) their own bracket, raise a
    guest house's, hostel's or chalet's, and lift a camp site's floor."""
    for key in ("charge", "fee"):
        value = number(tags.get(key))
        if value is not None:
            currency = named_currency(tags.get(key)) or currency_of(country)
            return Price(value, value, True, currency) if currency else Price(None, None, True, None, NO_CURRENCY)
    if (tags.get("fee") or "").strip().lower() in FREE_FEES:
        return Price(0.0, 0.0, True, currency_of(country))
    region = REGIONS.get(REGION_OF.get((country or "").upper(), ""))
    if region is None:
        return Price(None, None, False, None, NO_BASIS)
    currency, brackets, by_stars = region
    low, high = brackets.get(kind, brackets["hotel"])
    if kind == "camp_site" and (tags.get("backpack") == "yes" or tags.get("tents") == "yes"):
        high = round(high * BACKPACK_CAMP_SHARE, 2)
    s = stars(tags)
    if s is not None and s >= 1 and (kind == "hotel" or kind not in brackets):
        return Price(*by_stars[min(5, int(s))], False, currency)
    if s is not None and s >= 1 and kind in STARRED_TYPES:
        star_low, star_high = by_stars[min(5, int(s))]
        return Price(max(low, star_low), max(high, star_high), False, currency)
    if s is not None and s > STARS_FLOOR and kind == "camp_site":
        lift = min(STARS_MAX_LIFT, (s - STARS_FLOOR) * STARS_STEP)
        low = round(low + (high - low) * lift, 2)
    return Price(low, high, False, currency)
