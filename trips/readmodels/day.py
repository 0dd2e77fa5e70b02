"""The day read model: a stage on the wire (camelCase, no geometry), alone or inside its trip.

Built once here; REST answers it as it is, MCP trims it (mcp/answers.py) and the share page floors it. Alerts are
rendered when read (docs/RULES.md "Rendering at read time"); `groups` says per alert group whether it ran, as a group
never computed is not "no alerts".
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np

from trips import computations
from trips.core import i18n
from trips.core.stored_texts import said_stored
from trips.enrich import registry
from trips.enrich.alerts import accommodations, crossings, nearby, pois, terrain  # noqa: F401  (register codes)
from trips.enrich.alerts import surfaces as surface_alerts  # noqa: F401  (register codes)
from trips.enrich.alerts import weather as weather_alerts  # noqa: F401  (register codes)
from trips.enrich.alerts.catalogue import GROUPS, SEVERITIES, render
from trips.enrich.weather import HORIZON_DAYS, today_utc
from trips.errors import N_
from trips.models import Stage, Trip
from trips.readmodels import ways, words
from trips.route import profile
from trips.route.elevation import NO_ELEVATION, rounded
from trips.route.pacing import rider_time
from trips.services.lodging_road import shown

# The per-day fields the enrichments own (stage.enrichment); None on the wire = never computed.
ENRICHMENT_FIELDS = ("resupply", "supplyTimeline", "waterPoints", "bikeShops", "railwayStations", "culturalPois",
                     "terrain")
NOT_COMPUTED = "not computed"
# The digest names rain when the riding window's chance of it reaches WET_CHANCE %, unless its word (a WMO code
# from WET_CODES up: drizzle, rain, snow, showers, storms) already says it falls.
WET_CHANCE, WET_CODES = 50, 51
RAIN_LIKELY = N_("weather.rain_likely")
PARTIAL = "partial"
OFF_MAP = "off map"
GROUP_STATUSES = ("done", PARTIAL, "running", "failed", OFF_MAP, NOT_COMPUTED)
# The group that looks around the day's end (the places to sleep): off the map when the day's end is; and the one
# map group that looks at every day, on the map or not (terrain: docs/RULES.md "Map coverage").
END_GROUPS, EVERY_DAY_GROUPS = frozenset({"accommodations"}), frozenset({"terrain"})
END_SLACK_KM, END_SLACK_SHARE = 1.0, 0.02  # a stretch off the map ending this near the day's distance reaches its end
_RANK = {severity: i for i, severity in enumerate(SEVERITIES)}


def _point(lat, lon, ele) -> dict:
    return {"lat": round(lat, 6), "lon": round(lon, 6), "ele": None if ele is None else round(ele, 1)}


def elevation_reason(stage: Stage) -> str | None:
    """Why the day's climbing is null (docs/RULES.md "Elevation"), None when it is known (a rest day climbs 0)."""
    return i18n.t(NO_ELEVATION, i18n.current_locale()) if stage.elevation is None and not stage.is_rest_day else None


def alerts(stage: Stage, segments: bool = True, locale: str | None = None) -> list[dict]:
    """The day's alerts as the reader sees them ({code, severity, group, message, action?}), critical first,
    then warning, then nudge; within a severity in group order (catalogue GROUPS), then as stored. Without
    `segments`, an action loses its polylines (map geometry, read with the day: a trip's days stay small).
    Rendered in `locale`, by default the reader's (trips/core/i18n.py current_locale: the account's, else
    Accept-Language on REST, else English); a country's ISO code is named here (docs/RULES.md "Crossings")."""
    locale = locale or i18n.current_locale()
    out = []
    for group in sorted(stage.alerts_by_group or {}, key=_group_rank):
        for fact in stage.alerts_by_group[group] or []:
            if not segments and "segments" in (fact.get("action") or {}):
                fact = {**fact, "action": {k: v for k, v in fact["action"].items() if k != "segments"}}
            out.append(render(fact, stage.day_number, locale))
    return sorted(out, key=lambda a: _RANK.get(a["severity"], len(SEVERITIES)))


def _group_rank(group: str) -> int:
    return GROUPS.index(group) if group in GROUPS else len(GROUPS)


def _computation_of_group() -> dict[str, str]:
    """{alert group: the computation that writes it} (trips/enrich/registry.py)."""
    return {e.group: e.name for e in registry.ENRICHMENTS.values() if e.group}


def off_map(stage: Stage, cover: dict | None, group: str) -> bool:
    """Whether `group`'s computation had nothing of the map to look at on the day (docs/RULES.md "Map coverage"): no
    imported area touches the day, or, for a group that looks around the day's end, its last stretch off the map
    reaches the end."""
    if cover is None or group in EVERY_DAY_GROUPS:
        return False
    if cover["share"] == 0:
        return True
    gaps = cover.get("offMapKm") or []
    slack = max(END_SLACK_KM, END_SLACK_SHARE * stage.distance)
    return group in END_GROUPS and bool(gaps) and gaps[-1][1] >= stage.distance - slack


def group_statuses(trip: Trip, stage: Stage) -> dict[str, str]:
    """{group: done | partial | running | failed | off map | not computed} for every alert group of the catalogue:
    running while its computation is queued or running, done once it wrote this day, partial when it wrote it but
    reads the map and the map covers the day only partly (`mapCoverage` says which km were not looked at:
    docs/RULES.md "Map coverage"), off map when its computation settled without looking at the day because the
    part of the day it reads is off the map (`off_map`), failed when its computation failed, else never computed
    (the day has no entry for it)."""
    status = {c.name: c.status for c in trip.computations}
    ran = stage.alerts_by_group or {}
    names = _computation_of_group()
    cover = registry.day_map_coverage(stage)
    part = cover is not None and cover["share"] < registry.FULL_COVERAGE
    out = {}
    for group in GROUPS:
        name = names.get(group)
        state = status.get(name)
        if state in computations.ACTIVE:
            out[group] = "running"
        elif group in ran:
            out[group] = PARTIAL if part and name not in registry.MAP_FREE else "done"
        elif state in ("done", "failed") and name not in registry.MAP_FREE and off_map(stage, cover, group):
            out[group] = OFF_MAP
        elif state == "failed":
            out[group] = "failed"
        else:
            out[group] = NOT_COMPUTED
    return out


AVAILABILITIES = ("available", "past", "beyond_horizon", "unavailable")


def stage_date(trip: Trip, stage: Stage):
    """startDate + the day's index (docs/RULES.md "Weather"), None on an undated trip."""
    return trip.start_date + timedelta(days=stage.position) if trip.start_date else None


def forecast(trip: Trip, stage: Stage, hourly: bool = False, locale: str | None = None) -> dict | None:
    """The day's stored forecast (trips/enrich/weather.py) when it is for the day's current date (a start date
    moved or cleared since leaves none), without its hourly slots unless `hourly`. Its description is the word of
    its WMO code in `locale`, by default the reader's (trips/readmodels/words.py): the stored one is English."""
    stored = (stage.enrichment or {}).get("weather")
    day = stage_date(trip, stage)
    if not isinstance(stored, dict) or day is None or stored.get("date") != day.isoformat():
        return None
    out = dict(stored) if hourly else {k: v for k, v in stored.items() if k != "hourly"}
    out["description"] = words.describe(stored, locale or i18n.current_locale())
    return out


def weather_availability(trip: Trip, stage: Stage, today=None) -> str | None:
    """Derived when read, never stored: past or beyond_horizon from the day's date (16 days, docs/RULES.md "Weather"),
    available with a forecast, unavailable once the weather computation settled without one; None on an undated
    trip or while the forecast may still come."""
    day = stage_date(trip, stage)
    if day is None:
        return None
    offset = (day - (today or today_utc())).days
    if offset < 0:
        return "past"
    if offset > HORIZON_DAYS:
        return "beyond_horizon"
    if forecast(trip, stage) is not None:
        return "available"
    status = next((c.status for c in trip.computations if c.name == "weather"), None)
    return "unavailable" if status in ("done", "failed") else None


def weather_word(trip: Trip, stage: Stage, locale: str | None = None) -> str | None:
    """The digest's short weather: the median hour's description in the reader's language and the riding
    window's temperatures ("rain 12–18°", "pluie 12–18°"), None without a forecast."""
    w = forecast(trip, stage, locale=locale)
    if w is None:
        return None
    low, high = w.get("tempMin"), w.get("tempMax")
    temps = f" {low:.0f}–{high:.0f}°" if isinstance(low, (int, float)) and isinstance(high, (int, float)) else ""
    chance, code = w.get("precipitationProbability"), w.get("weatherCode")
    if isinstance(chance, (int, float)) and chance >= WET_CHANCE and not (
            isinstance(code, (int, float)) and code >= WET_CODES):  # "mainly clear" must not hide a likely rain
        return i18n.t(RAIN_LIKELY, locale or i18n.current_locale(), description=w["description"],
                      percent=i18n.number(chance, locale or i18n.current_locale(), 0)) + temps
    return f"{w['description']}{temps}"


def place_price(place: dict) -> dict | None:
    """{min, max, currency (ISO 4217), estimate} a night of a stored place to sleep: `estimate` true unless the map
    (or the rider) gave the place's own price (docs/RULES.md "Accommodations"); None without a price, or in no
    currency BTP can tell (a price is never shown in a money it may not be in)."""
    low, high, money = place.get("estimatedPriceMin"), place.get("estimatedPriceMax"), place.get("currency")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)) or \
            not isinstance(money, str):
        return None
    return {"min": low, "max": high, "currency": money, "estimate": not place.get("isExactPrice")}


def best_accommodation(stage: Stage) -> tuple[dict | None, bool]:
    """(the chosen place to sleep, True), else (the best ranked candidate, False), else (None, False)."""
    if stage.selected_accommodation:
        return shown(stage.selected_accommodation), True
    candidates = stage.accommodations or []
    return (candidates[0], False) if candidates else (None, False)


def day_labels(stage: Stage) -> tuple[str | None, str | None]:
    """(start, end) names of the day: the rider's label, else the map's nearest place (docs/RULES.md "Day labels",
    stage.enrichment["labels"], written by trips/enrich/labels.py)."""
    mapped = (stage.enrichment or {}).get("labels")
    mapped = mapped if isinstance(mapped, dict) else {}
    return stage.start_label or mapped.get("start"), stage.end_label or mapped.get("end")


def stage_summary(trip: Trip, stage: Stage, segments: bool = False) -> dict:
    """The day inside its trip; `segments` keeps the alerts' polylines (the day read alone)."""
    timing = rider_time(stage.distance, stage.elevation, trip.average_speed, trip.departure_hour)
    extra = stage.enrichment or {}
    start_label, end_label = day_labels(stage)
    rendered = alerts(stage, segments)
    return {
        "stageId": stage.id, "dayNumber": stage.day_number,
        "distance": round(stage.distance, 1), "elevation": rounded(stage.elevation),
        "elevationLoss": rounded(stage.elevation_loss), "elevationReason": elevation_reason(stage),
        "startPoint": _point(stage.start_lat, stage.start_lon, stage.start_ele),
        "endPoint": _point(stage.end_lat, stage.end_lon, stage.end_ele),
        "label": stage.label, "startLabel": start_label, "endLabel": end_label,  # the rider's, else the map's
        "isRestDay": stage.is_rest_day, "approximate": stage.approximate,
        "accommodations": list(stage.accommodations or []), "selectedAccommodation": shown(stage.selected_accommodation),
        "ridingHours": 0.0 if stage.is_rest_day else round(timing.riding_hours, 2),
        "estimatedArrival": None if stage.is_rest_day else _clock(timing.arrival_hour + _shift(trip, extra)),
        "alertCount": len(rendered), "alerts": rendered, "groups": group_statuses(trip, stage),
        "mapCoverage": registry.day_map_coverage(stage),
        **{key: extra.get(key) for key in ENRICHMENT_FIELDS}, **_terrain(extra.get("terrain")),
        **ways.tables(trip, stage),  # km by surface and way type, or null and why
        # the hourly slots with the day read alone (REST stage detail), as its polylines: a trip's days stay small
        "weather": forecast(trip, stage, hourly=segments), "weatherAvailability": weather_availability(trip, stage),
    }


def _stretches(kept: list | None) -> list[str] | None:
    """A rerouted day's stretches, each said in the reader's language (kept in no language:
    trips/services/waypoints.py)."""
    locale = i18n.current_locale()
    return None if kept is None else [said_stored(text, locale) for text in kept]


def _terrain(stored) -> dict:
    """The stored terrain with its elevationReason (a key: trips/enrich/terrain.py) in the reader's language;
    nothing when there is no reason to say."""
    if not isinstance(stored, dict) or not stored.get("elevationReason"):
        return {}
    return {"terrain": {**stored, "elevationReason": said_stored(stored["elevationReason"], i18n.current_locale())}}


def _shift(trip: Trip, extra: dict) -> float:
    """Hours the day's end point's clock is ahead of its start's (daylight's `clockShift`, docs/RULES.md "Times");
    0 on an undated trip, whatever an earlier dated analysis left."""
    shift = extra.get("clockShift") if trip.start_date is not None else None
    return shift / 60 if isinstance(shift, (int, float)) and not isinstance(shift, bool) else 0.0


def _clock(hour: float) -> str:
    minutes = int(round(hour * 60))
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def elevation_profile(stage: Stage) -> dict:
    """The day's compact profile ([[km, m], …], at most 64) and its categorised climbs (docs/RULES.md "Climbs"):
    both null when the day's elevation is unknown (its elevationReason says why), empty on a rest day."""
    if stage.is_rest_day:
        return {"profile": [], "climbs": []}
    if stage.elevation is None:
        return {"profile": None, "climbs": None}
    km, ele = profile.along(stage.geometry)
    keep = np.isfinite(ele)  # a settled line is known everywhere (docs/RULES.md "Elevation")
    km, ele = km[keep], ele[keep]
    return {"profile": profile.sampled(km, ele), "climbs": [
        {"startKm": c.start_km, "lengthKm": c.length_km, "gain": c.gain_m, "meanPct": c.mean_pct,
         "steepestPct": c.steepest_pct, "category": c.category} for c in profile.climbs(km, ele)]}


def stage_detail(trip: Trip, stage: Stage) -> dict:
    return {"tripId": trip.id, "version": trip.version, "outOfZone": trip.out_of_zone,
            "categoryStatus": registry.category_statuses(trip), **stage_summary(trip, stage, segments=True),
            **elevation_profile(stage),
            "routing": _stretches((stage.waypoint or {}).get("stretches")),  # a waypoint's reroute, stretch by stretch
            "cues": ways.day_cues(stage)}  # turn by turn, with the day read alone
