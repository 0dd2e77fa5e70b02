"""A day's surfaces, way types and cues as the reader sees them (docs/RULES.md "Surfaces and way types", "Cues"):
the tables the surfaces enrichment stored (trips/enrich/surfaces.py), or null with the reason in the reader's
language; the cues with their instruction worded in it. `day_cues` is what the exports (GPX, FIT) place."""
from __future__ import annotations

from trips.core import i18n
from trips.core.stored_texts import said_stored
from trips.enrich import registry
from trips.errors import N_
from trips.models import Stage, Trip

NAME = "surfaces"  # the computation that writes the fields (trips/enrich/surfaces.py NAME)
NOT_COMPUTED = N_("reason.ways_not_computed")
OFF_MAP = N_("reason.ways_off_map")
RUNNING = N_("reason.ways_running")
# The instruction of each turn (trips/osm/cues.py TURNS): alone, and onto a named street.
INSTRUCTIONS = {
    "continue": (N_("cue.continue"), N_("cue.continue_onto")),
    "slight_left": (N_("cue.slight_left"), N_("cue.slight_left_onto")),
    "slight_right": (N_("cue.slight_right"), N_("cue.slight_right_onto")),
    "left": (N_("cue.left"), N_("cue.left_onto")),
    "right": (N_("cue.right"), N_("cue.right_onto")),
    "sharp_left": (N_("cue.sharp_left"), N_("cue.sharp_left_onto")),
    "sharp_right": (N_("cue.sharp_right"), N_("cue.sharp_right_onto")),
    "u_turn": (N_("cue.u_turn"), N_("cue.u_turn_onto")),
    "roundabout": (N_("cue.roundabout"), N_("cue.roundabout_onto")),
}


def _stored(stage: Stage) -> dict:
    extra = stage.enrichment or {}
    return extra if "waysReason" in extra else {}


def reason(trip: Trip, stage: Stage, locale: str | None = None) -> str | None:
    """Why the day has no surfaces, way types or cues, in `locale`; None when it has them."""
    locale = locale or i18n.current_locale()
    stored = _stored(stage)
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
    stored = _stored(stage)
    return {"surfaces": stored.get("surfaces"), "wayTypes": stored.get("wayTypes"),
            "waysReason": reason(trip, stage, locale)}


def instruction(cue: dict, locale: str) -> str:
    alone, onto = INSTRUCTIONS.get(cue.get("turn"), INSTRUCTIONS["continue"])
    street = cue.get("street")
    return i18n.t(onto if street else alone, locale, street=street, exit=cue.get("exit") or 1)


def compact_km(table: dict | None) -> str | None:
    """{kind: km} as "paved 40.1, unpaved 2.3" (the kinds ridden, in the table's order), None for no table."""
    if table is None:
        return None
    return ", ".join(f"{kind} {km:.1f}" for kind, km in table.items() if km) or ""


def day_cues(stage: Stage, locale: str | None = None) -> list[dict] | None:
    """The day's cues in order ({km, turn, exit?, street, instruction, lat, lon}), None when it has none to say
    (see `reason`); an empty list is a day ridden on one road."""
    locale = locale or i18n.current_locale()
    stored = _stored(stage).get("cues")
    if stored is None:
        return None
    return [{**{k: c.get(k) for k in ("km", "turn", "street", "lat", "lon")},
             **({"exit": c.get("exit")} if c.get("turn") == "roundabout" else {}),
             "instruction": instruction(c, locale)} for c in stored]


MORE = N_("cue.more")


def compact_cues(stage: Stage, most: int, locale: str | None = None) -> list[str] | None:
    """At most `most` cues as "12.3 left Rue X" ("roundabout 3" for a roundabout's third exit), then how many more
    there are and where they are said, None when the day has none to say."""
    locale = locale or i18n.current_locale()
    found = day_cues(stage, locale)
    if found is None:
        return None
    words = []
    for c in found[:most]:
        turn = c["turn"] + (f" {c.get('exit') or 1}" if c["turn"] == "roundabout" else "")
        words.append(" ".join(p for p in (f"{c['km']:.1f}", turn, c.get("street") or "") if p))
    if len(found) > most:
        words.append(i18n.t(MORE, locale, count=len(found) - most))
    return words
