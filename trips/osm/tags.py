"""Which OpenStreetMap objects the import keeps, under which kind, and which of their tags.

The vocabulary of docs/RULES.md "Accommodations": the seven accommodation types with the tags ranking and pricing
read (website/url, description, opening_hours, wikidata, stars, capacity, charge, fee, backpack,
tents, seasonal); the resupply categories (docs/RULES.md "Resupply") with opening_hours; drinking
water; bicycle shops (repair-capable or not) and repair stations; charging stations (docs/RULES.md "Terrain");
railway stations; pharmacies, hospitals and clinics; cultural places; fords. Ways, ferries, places and
boundaries have their own tables (trips/osm/tables.py).
"""
from __future__ import annotations

ACCOMMODATION = frozenset({"camp_site", "hostel", "alpine_hut", "chalet", "guest_house", "hotel", "wilderness_hut"})
RESUPPLY_AMENITY = frozenset({"restaurant", "cafe", "bar", "fast_food", "marketplace", "fuel"})
RESUPPLY_SHOP = frozenset({"supermarket", "convenience", "bakery", "butcher", "pastry", "deli", "greengrocer",
                           "general", "farm"})
HEALTH = frozenset({"pharmacy", "hospital", "clinic"})
CULTURE_TOURISM = frozenset({"museum", "attraction", "viewpoint", "gallery"})
CULTURE_HISTORIC = frozenset({"monument", "castle", "ruins", "archaeological_site", "fort", "manor", "city_gate"})
STATIONS = frozenset({"station", "halt"})
NOT_TRAIN = frozenset({"subway", "light_rail", "monorail", "funicular", "miniature"})
WATER_AMENITY = frozenset({"drinking_water", "water_point"})
YES = frozenset({"yes", "true", "1"})

KINDS = ("accommodation", "resupply", "water", "bike_shop", "charging", "station", "health", "culture", "ford")

# Keys that make an object worth looking at: osmium drops everything else before Python sees it.
POINT_KEYS = ("tourism", "amenity", "shop", "railway", "historic", "ford", "man_made", "natural", "place",
              "healthcare")
NODE_KEYS = POINT_KEYS  # not highway: crossings and traffic signals are nodes nobody reads
WAY_KEYS = (*POINT_KEYS, "highway", "route", "waterway")
AREA_KEYS = ("boundary", "place", "tourism", "historic")  # countries; squares and attractions drawn as multipolygons

KEPT_TAGS = frozenset({
    "name", "opening_hours", "website", "url", "contact:website", "description", "wikidata", "wikipedia",
    "image", "stars", "capacity", "charge", "fee", "backpack", "tents", "seasonal", "phone", "contact:phone",
    "addr:street", "addr:housenumber", "addr:postcode", "addr:city", "service:bicycle:repair",
    "service:bicycle:retail", "drinking_water", "religion", "station", "cuisine", "check_date",
})
MAX_VALUE = 255

# Highway values that are no road or path a bicycle uses (or not built yet).
SKIPPED_HIGHWAYS = frozenset({"proposed", "construction", "abandoned", "razed", "platform", "bus_stop",
                              "elevator", "corridor", "services", "rest_area", "raceway", "emergency_bay"})
WAY_TAGS = ("surface", "tracktype", "smoothness", "cycleway", "cycleway:left", "cycleway:right", "cycleway:both",
            "bicycle", "maxspeed")


def point_kinds(tags) -> list[tuple[str, str]]:
    """The (kind, subkind) pairs an object's tags (a dict) give it; [] to skip it."""
    found = []
    tourism, amenity, shop = tags.get("tourism"), tags.get("amenity"), tags.get("shop")
    if tourism in ACCOMMODATION:
        found.append(("accommodation", tourism))
    if amenity in RESUPPLY_AMENITY and (shop is None or shop in RESUPPLY_SHOP):  # a boutique's café corner: no
        found.append(("resupply", amenity))
    if shop in RESUPPLY_SHOP:
        found.append(("resupply", shop))
    water = _water(tags, amenity)
    if water:
        found.append(("water", water))
    if shop == "bicycle":
        found.append(("bike_shop", "shop" if tags.get("service:bicycle:repair") == "no" else "repair"))
    elif amenity == "bicycle_repair_station":
        found.append(("bike_shop", "repair_station"))
    if amenity == "charging_station":
        found.append(("charging", "charging_station"))
    railway = tags.get("railway")
    if railway in STATIONS and tags.get("station") not in NOT_TRAIN:
        found.append(("station", railway))
    health = amenity if amenity in HEALTH else tags.get("healthcare")
    if health in HEALTH:
        found.append(("health", health))
    historic = tags.get("historic")
    if tourism in CULTURE_TOURISM:
        found.append(("culture", tourism))
    elif historic in CULTURE_HISTORIC:
        found.append(("culture", historic))
    elif amenity == "place_of_worship":
        found.append(("culture", "church" if tags.get("religion") == "christian" else "place_of_worship"))
    if tags.get("ford") in YES:
        found.append(("ford", "ford"))
    return found


def feature_class(tags) -> str | None:
    """The class (trips/osm/tables.py FEATURE_RANKS) of a named feature place search finds, else None: a part of a
    town, an island or a square by its `place`; a station of trains, metros, trams, buses or ferries; an attraction
    (what "culture" is in point_kinds). Streets are found from the roads (trips/osm/streets.py)."""
    place = tags.get("place")
    if place in FEATURE_PLACES:
        return place
    if tags.get("railway") in STATIONS or tags.get("amenity") in ("bus_station", "ferry_terminal"):
        return "station"
    if tags.get("tourism") in CULTURE_TOURISM or tags.get("historic") in CULTURE_HISTORIC \
            or tags.get("amenity") == "place_of_worship":
        return "attraction"
    return None


FEATURE_PLACES = frozenset({"suburb", "quarter", "neighbourhood", "island", "square", "locality"})
# Relations assembled as areas (osmium's TagFilter pairs): countries, and multipolygon squares and attractions.
AREA_TAGS = (("admin_level", "2"), ("place", "square"), *(("tourism", v) for v in sorted(CULTURE_TOURISM)),
             *(("historic", v) for v in sorted(CULTURE_HISTORIC)))


def _water(tags, amenity: str | None) -> str | None:
    """The kind of drinking water an object is: amenity drinking_water or water_point; a tap, a fountain or a
    spring marked drinkable (drinking_water=yes: one not so marked is not known to be); None otherwise."""
    drinkable = tags.get("drinking_water")
    if amenity in WATER_AMENITY:
        return amenity
    if tags.get("man_made") == "water_tap" and drinkable in YES:
        return "water_tap"
    if amenity == "fountain" and drinkable in YES:
        return "fountain"
    if tags.get("natural") == "spring" and drinkable in YES:
        return "spring"
    return None


RIVERS = frozenset({"river", "canal"})  # drawn as lines; streams and ditches are too many and too small to show


def water_kind(tags: dict, closed: bool) -> str | None:
    """What the share page's map draws of a way (trips/osm/tables.py osm_water): "coastline", "water" (a closed
    ring of natural=water or waterway=riverbank) or "river"; None for anything else."""
    natural, waterway = tags.get("natural"), tags.get("waterway")
    if natural == "coastline":
        return "coastline"
    if closed and (natural == "water" or waterway == "riverbank"):
        return "water"
    if waterway in RIVERS:
        return "river"
    return None


def short(value: str | None, size: int) -> str | None:
    return None if value is None else value[:size]
