"""The alert catalogue: one registry of codes (domain.md §6), each with its severity, group and message.

A duplicate code is refused when its module is imported (the manner of Sentry's GroupTypeRegistry). Facts
store only the code and raw parameters; `render` makes the text at read time (English now; step 8 brings
Babel catalogues and French), injecting `stage` (the day number) from the owning day.
"""
from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("critical", "warning", "nudge")
GROUPS = ("terrain", "pois", "accommodations", "calendar", "wind", "bike_shop", "water_point", "health_service",
          "cultural_poi", "railway_station", "border_crossing", "ferry", "ford")


@dataclass(frozen=True)
class AlertKind:
    code: str
    severity: str
    group: str
    message: str        # English template with {name} placeholders, `{stage}` included where the day is named
    params: tuple[str, ...] = ()


CATALOGUE: dict[str, AlertKind] = {}


def register(code: str, severity: str, group: str, message: str, params: tuple[str, ...] = ()) -> AlertKind:
    """Add a code. Raises ValueError on a duplicate code, an unknown severity or group."""
    if code in CATALOGUE:
        raise ValueError(f"alert code {code!r} is registered twice")
    if severity not in SEVERITIES or group not in GROUPS:
        raise ValueError(f"alert code {code!r}: unknown severity {severity!r} or group {group!r}")
    kind = CATALOGUE[code] = AlertKind(code, severity, group, message, params)
    return kind


def render(fact: dict, day_number: int) -> dict:
    """A stored fact as the reader sees it: {code, severity, group, message, action?}. Unknown codes (a
    catalogue that lost one) render with their code only, never fail the read."""
    kind = CATALOGUE.get(fact.get("code"))
    if kind is None:
        return {"code": fact.get("code"), "severity": "nudge", "group": None, "message": fact.get("code")}
    values = {**{k: _format(v) for k, v in (fact.get("params") or {}).items()}, "stage": day_number}
    try:
        message = kind.message.format(**values)
    except (KeyError, IndexError, ValueError):
        message = kind.message
    out = {"code": kind.code, "severity": kind.severity, "group": kind.group, "message": message}
    if fact.get("action"):
        out["action"] = fact["action"]
    return out


def _format(value):
    if isinstance(value, float):
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return value
