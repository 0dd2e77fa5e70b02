"""Calendar and daylight (docs/RULES.md "Alert catalogue"): a holiday or Sunday on a day's date, arrival after dark."""
from __future__ import annotations

from trips.enrich.alerts.catalogue import register

# Named and unnamed holidays share the code: `holiday` is the name the `holidays` package gives (English),
# `country` the ISO code of the country it is a holiday of (named in the reader's language on read).
CALENDAR_PUBLIC_HOLIDAY = register(
    "calendar_public_holiday", "nudge", "calendar",
    "Stage {stage} coincides with a public holiday in {country} ({holiday}): shops and services may be closed.",
    ("holiday", "country", "date"))
CALENDAR_SUNDAY = register(
    "calendar_sunday", "nudge", "calendar",
    "Stage {stage} falls on a Sunday: many shops may be closed.", ("date",))
# Times are local "HH:MM" at the day's end point; the auto-fix moves the departure hour (docs/RULES.md "Daylight").
SUNSET_ARRIVAL_AFTER_TWILIGHT = register(
    "sunset_arrival_after_twilight", "warning", "daylight",
    "Stage {stage}: estimated arrival at {arrival}, after twilight end ({twilight}, sunset {sunset}). "
    "Consider leaving earlier.", ("arrival", "twilight", "sunset"))
