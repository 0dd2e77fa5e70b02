"""A day's cues as the reader and the exports see them (docs/RULES.md "Cues"): the turns the surfaces enrichment
stored (trips/enrich/surfaces.py), each with its instruction in the reader's language and its position."""
from __future__ import annotations

from trips.core import i18n
from trips.errors import N_
from trips.models import Stage

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


def stored_ways(stage: Stage) -> dict:
    """The surfaces enrichment's fields on the day, {} when it never wrote them."""
    extra = stage.enrichment or {}
    return extra if "waysReason" in extra else {}


def instruction(cue: dict, locale: str) -> str:
    alone, onto = INSTRUCTIONS.get(cue.get("turn"), INSTRUCTIONS["continue"])
    street = cue.get("street")
    return i18n.t(onto if street else alone, locale, street=street, exit=cue.get("exit") or 1)


def day_cues(stage: Stage, locale: str | None = None) -> list[dict] | None:
    """The day's cues in order ({km, turn, exit?, street, instruction, lat, lon}), None when it has none to say
    (trips/readmodels/ways.py `reason` says why); an empty list is a day ridden on one road."""
    locale = locale or i18n.current_locale()
    stored = stored_ways(stage).get("cues")
    if stored is None:
        return None
    return [{**{k: c.get(k) for k in ("km", "turn", "street", "lat", "lon")},
             **({"exit": c.get("exit")} if c.get("turn") == "roundabout" else {}),
             "instruction": instruction(c, locale)} for c in stored]
