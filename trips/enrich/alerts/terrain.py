"""Terrain alerts (docs/RULES.md "Alert catalogue"): continuity between days, climbs, surfaces, traffic, e-bike
range and rest days. Rules in trips/enrich/terrain.py; `sunset_arrival_after_twilight` is daylight's.

Parameters are stored raw: kilometres as floats (`distance`, `length`, `range`), metres as ints (`gap`,
`elevation`), percentages as floats; `surface` is a list of whitelisted OSM values joined with ", ".
"""
from __future__ import annotations

from trips.enrich.alerts.catalogue import register

GROUP = "terrain"

CONTINUITY_GAP_CRITICAL = register(
    "continuity_gap_critical", "critical", GROUP,
    "Discontinuity: {distance} km between stage {stage} and {next}.", ("distance", "next"))
CONTINUITY_GAP_WARNING = register(
    "continuity_gap_warning", "warning", GROUP,
    "Gap of {gap}m between stage {stage} and {next}.", ("gap", "next"))
ELEVATION_GAIN = register(
    "elevation_gain", "warning", GROUP,
    "Significant elevation: {elevation}m D+ on this stage.", ("elevation",))
STEEP_GRADIENT = register(
    "steep_gradient", "warning", GROUP,
    "Steep climb detected: {gradient}% gradient over {distance} km. Tough with a loaded bike.",
    ("gradient", "distance"))
SURFACE_ROUGH = register(
    "surface_rough", "warning", GROUP,
    "Rough surface totalling {length} km ({surface}). Check bike suitability.", ("length", "surface"))
TRAFFIC_MAIN_ROAD = register(
    "traffic_main_road", "critical", GROUP,
    ("{count} segment on main road without bike lane detected ({length} km in total).",
     "{count} segments on main road without bike lane detected ({length} km in total)."), ("count", "length"))
TRAFFIC_SECONDARY_FAST = register(
    "traffic_secondary_road_fast", "warning", GROUP,
    tuple(f"{{count}} {word} on a fast secondary road without bike lane (speed limit up to {{maxspeed}} km/h, "
          "{length} km in total)." for word in ("segment", "segments")), ("count", "length", "maxspeed"))
TRAFFIC_SECONDARY_SLOW = register(
    "traffic_secondary_road_slow", "nudge", GROUP,
    tuple(f"{{count}} {word} on a secondary road without bike lane, at a moderate speed limit (≤{{maxspeed}} km/h, "
          "{length} km in total)." for word in ("segment", "segments")), ("count", "length", "maxspeed"))
EBIKE_RANGE_EXCEEDED = register(
    "ebike_range_exceeded", "warning", GROUP,
    "Stage {stage} ({distance} km) exceeds estimated e-bike range ({range} km). Plan a recharge or shorten "
    "the stage.", ("distance", "range"))
REST_DAY_SUGGESTED = register(
    "rest_day_suggested", "nudge", GROUP,
    "Stage {stage} is day {days} of cycling without a break. Consider inserting a rest day.", ("days",))
