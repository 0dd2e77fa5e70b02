"""A day's surfaces, way types and cues as the reader sees them (docs/RULES.md "Surfaces and way types", "Cues"):
the tables the surfaces enrichment stored (trips/enrich/surfaces.py), or null with the reason in the reader's
language; the cues with their instruction worded in it (`day_cues`, trips/services/day_cues.py: what the exports,
GPX and FIT, place)."""
from __future__ import annotations

import json

from trips.core import i18n
from trips.core.stored_texts import said_stored
from trips.core.text import label
from trips.enrich import registry
from trips.errors import N_
from trips.models import Stage, Trip
from trips.services.day_cues import day_cues, stored_ways

__all__ = ["compact_cues", "compact_km", "day_cues", "reason", "tables"]

NAME = "surfaces"  # the computation that writes the fields (trips/enrich/surfaces.py NAME)
NOT_COMPUTED = N_("reason.ways_not_computed")
OFF_MAP = N_("reason.ways_off_map")
RUNNING = N_("reason.ways_running")


def reason(trip: Trip, stage: Stage, locale: str | None = None) -> str | None:
    """Why the day has no surfaces, way types or cues, in `locale`; None when it has them."""
    locale = locale or i18n.current_locale()
    stored = stored_ways(stage)
    if stored:
        return said_stored(stored["waysReason"], locale) if stored.get("waysReason") else None
    row = next((c for c in trip.computations if c.name == NAME), None)
    if row is not None and row.status in ("pending", "running"):
        return i18n.t(RUNNING, locale)
    if row is not None and row.status == "failed" and row.reason:
        return said_stored(row.reason, locale)
    cover = registry.day_map_coverage(stage)
    if row is not None and cover is not None and cover["share"] == 0:
        return i18n.t(OFF_MAP, locale)  # the computation looks only at the days the map touches
    return i18n.t(NOT_COMPUTED, locale)


def tables(trip: Trip, stage: Stage, locale: str | None = None) -> dict:
    """{surfaces, wayTypes, waysReason}: km by surface class and by way type adding up to the day's distance, or
    null with the reason."""
    stored = stored_ways(stage)
    return {"surfaces": stored.get("surfaces"), "wayTypes": stored.get("wayTypes"),
            "waysReason": reason(trip, stage, locale)}


def compact_km(table: dict | None) -> str | None:
    """{kind: km} as "paved 40.1, unpaved 2.3" (the kinds ridden, in the table's order), None for no table."""
    if table is None:
        return None
    return ", ".join(f"{kind} {km:.1f}" for kind, km in table.items() if km) or ""


MORE = N_("cue.more")
MORE_BYTES = 100  # kept for the note saying how many more
STREET_CHARS = 32  # a street's name in a compact cue, cut at a word


def size(value) -> int:
    """Bytes of `value` as compact JSON in UTF-8 (how an answer's size is measured)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def compact_cues(stage: Stage, most: int, room: int, locale: str | None = None) -> list[str] | None:
    """At most `most` cues as "12.3 left Rue X" ("roundabout 3" for a roundabout's third exit), as many as `room`
    bytes of JSON hold, then how many more there are and where they are said; None when the day has none to say."""
    locale = locale or i18n.current_locale()
    found = day_cues(stage, locale)
    if found is None:
        return None
    words: list[str] = []
    room -= MORE_BYTES
    for c in found[:most]:
        turn = c["turn"] + (f" {c.get('exit') or 1}" if c["turn"] == "roundabout" else "")
        word = " ".join(p for p in (f"{c['km']:.1f}", turn, label(c.get("street"), STREET_CHARS) or "") if p)
        room -= size(word) + 1
        if room < 0:
            break
        words.append(word)
    if len(found) > len(words):
        words.append(i18n.t(MORE, locale, count=len(found) - len(words)))
    return words


# The share page's words for the kinds of each table (trips/osm/waykinds.py SURFACE_CLASSES, WAY_TYPES).
SHARE_WORDS = {
    "surfaces": (N_("share.surfaces"), {"paved": N_("share.surface_paved"), "compacted": N_("share.surface_compacted"),
                                        "unpaved": N_("share.surface_unpaved"), "unknown": N_("share.kind_unknown")}),
    "wayTypes": (N_("share.way_types"), {
        "cycleway": N_("share.way_cycleway"), "quiet_road": N_("share.way_quiet_road"),
        "main_road": N_("share.way_main_road"), "track": N_("share.way_track"), "path": N_("share.way_path"),
        "ferry": N_("share.way_ferry"), "unknown": N_("share.kind_unknown")}),
}
KM_OF = N_("share.km_of")


def share_view(trip: Trip, stage: Stage, locale: str) -> dict:
    """What the share page draws of a riding day: a bar per table ({title, parts: [(kind, % of the day, words)]}),
    the reason when there are none, and the cue sheet."""
    found = tables(trip, stage, locale)
    bars = []
    for key, (title, words) in SHARE_WORDS.items():
        table = found[key]
        total = sum((table or {}).values())
        if not table or total <= 0:
            continue
        parts = [(kind, round(100 * km / total, 1),
                  i18n.t(KM_OF, locale, kind=i18n.t(words.get(kind, words["unknown"]), locale),
                         km=i18n.number(km, locale)))
                 for kind, km in table.items() if km]
        bars.append({"title": i18n.t(title, locale), "parts": parts})
    cues = day_cues(stage, locale)
    return {"bars": bars, "reason": found["waysReason"],
            "cues": [{**c, "km": i18n.number(c["km"], locale)} for c in cues or []]}
