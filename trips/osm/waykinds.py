"""What a road is to a rider (docs/RULES.md "Surfaces and way types"): its surface class from surface, tracktype and
smoothness, its way type from highway, cycleway, bicycle and route=ferry, and what each bike type makes of a surface
(the router's weight and the share of unpaved a day may hold before an alert)."""
from __future__ import annotations

SURFACE_CLASSES = ("paved", "compacted", "unpaved", "unknown")
WAY_TYPES = ("cycleway", "quiet_road", "main_road", "track", "path", "ferry", "unknown")
BIKE_TYPES = ("road", "touring", "gravel", "mountain")
DEFAULT_BIKE = "touring"

PAVED = frozenset(("paved", "asphalt", "concrete", "concrete:plates", "concrete:lanes", "paving_stones", "sett",
                   "cobblestone", "unhewn_cobblestone", "metal", "wood", "chipseal", "bricks", "brick"))
COMPACTED = frozenset(("compacted", "fine_gravel", "gravel", "pebblestone"))
UNPAVED = frozenset(("unpaved", "dirt", "ground", "earth", "grass", "sand", "mud", "clay", "rock", "stone",
                     "woodchips", "grass_paver", "soil", "snow", "ice", "salt"))
TRACKTYPE = {"grade1": "paved", "grade2": "compacted", "grade3": "unpaved", "grade4": "unpaved", "grade5": "unpaved"}
SMOOTHNESS = {"excellent": "paved", "good": "paved", "bad": "compacted", "very_bad": "unpaved",
              "horrible": "unpaved", "very_horrible": "unpaved", "impassable": "unpaved"}

MAIN_HIGHWAYS = frozenset(("trunk", "trunk_link", "primary", "primary_link", "secondary", "secondary_link"))
PATH_HIGHWAYS = frozenset(("path", "footway", "bridleway", "pedestrian", "steps", "corridor"))
CYCLEWAY_KEYS = ("cycleway", "cycleway_left", "cycleway_right", "cycleway_both",
                 "cycleway:left", "cycleway:right", "cycleway:both")
NO_CYCLEWAY = frozenset(("", "no", "none", "separate"))

# The router's weight on an edge's cost by bike type and surface class (paved and unknown weigh 1).
ROUTE_WEIGHT = {
    "road": {"compacted": 3.0, "unpaved": 6.0},
    "touring": {"compacted": 1.2, "unpaved": 2.0},
    "gravel": {"compacted": 1.0, "unpaved": 1.2},
    "mountain": {},
}
# The share of a day's km off paved roads above which a day does not suit the bike: `unpaved` for most, `compacted`
# counts too for a road bike; a mountain bike has no limit.
ROUGH_SHARE = {"road": 0.05, "touring": 0.25, "gravel": 0.6}
ROUGH_CLASSES = {"road": ("compacted", "unpaved"), "touring": ("unpaved",), "gravel": ("unpaved",)}
# osm_edge.grade, the surface class as a small number the router reads with its costs.
GRADE = {"unknown": 0, "paved": 1, "compacted": 2, "unpaved": 3}


def _first(value) -> str:
    return str(value or "").split(";")[0].strip().lower()


def surface_class(tags: dict) -> str:
    """paved, compacted, unpaved or unknown: `surface` first; without one, `tracktype`, then `smoothness`."""
    surface = _first(tags.get("surface"))
    if surface:
        if surface in PAVED:
            return "paved"
        if surface in COMPACTED:
            return "compacted"
        return "unpaved" if surface in UNPAVED else "unknown"
    by_track = TRACKTYPE.get(_first(tags.get("tracktype")))
    if by_track:
        return by_track
    return SMOOTHNESS.get(_first(tags.get("smoothness")), "unknown")


def has_cycleway(tags: dict) -> bool:
    return any(_first(tags.get(k)) not in NO_CYCLEWAY for k in CYCLEWAY_KEYS)


def way_type(tags: dict) -> str:
    """cycleway, quiet_road, main_road, track, path or ferry (route=ferry without a highway)."""
    highway = _first(tags.get("highway"))
    if not highway:
        return "ferry" if _first(tags.get("route")) == "ferry" else "unknown"
    bicycle = _first(tags.get("bicycle"))
    if highway == "cycleway" or (highway in PATH_HIGHWAYS | {"track"} and bicycle == "designated"):
        return "cycleway"
    if highway == "track":
        return "track"
    if highway in PATH_HIGHWAYS:
        return "path"
    if has_cycleway(tags) or bicycle == "designated":
        return "cycleway"
    return "main_road" if highway in MAIN_HIGHWAYS else "quiet_road"


def grade(tags: dict) -> int:
    return GRADE[surface_class(tags)]


def route_weights(bike: str) -> list[float]:
    """The weight of each grade (GRADE's order) for `bike`."""
    weights = ROUTE_WEIGHT.get(bike, ROUTE_WEIGHT[DEFAULT_BIKE])
    return [weights.get(c, 1.0) for c in sorted(GRADE, key=GRADE.__getitem__)]


def rough_km(bike: str, surfaces: dict) -> float:
    """The km of `surfaces` ({class: km}) beyond what `bike` is for (its ROUGH_CLASSES)."""
    return sum(float(surfaces.get(c) or 0.0) for c in ROUGH_CLASSES.get(bike, ()))
