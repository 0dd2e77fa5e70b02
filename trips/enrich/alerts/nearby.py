"""Services near each day (docs/RULES.md "Alert catalogue"): bike shops, drinking water, cultural places, railway
stations, health services. One group each. A "none within R" is said of what the imported map covers of its own
search area: wholly, as far as it reaches ("…_in_covered"), or not at all ("…_unknown", docs/RULES.md "Map coverage")."""
from trips.enrich.alerts.catalogue import register

BIKE_SHOP_NONE_NEARBY = register(
    "bike_shop_none_nearby", "nudge", "bike_shop",
    "No bike shop doing repairs detected within {threshold} km of stage {stage}'s route. Carry a repair kit and "
    "spare parts.", ("threshold",), defaults=(("threshold", 2),))  # stored without it: the 2 km it always was
BIKE_SHOP_NONE_IN_COVERED = register(
    "bike_shop_none_in_covered", "nudge", "bike_shop",
    "No bike shop doing repairs detected within {threshold} km of the {covered} km of stage {stage} the imported "
    "map covers; beyond them unknown. Carry a repair kit and spare parts.", ("threshold", "covered"))
WATER_POINT_GAP = register(
    "water_point_gap", "nudge", "water_point",
    "Stretch of over {threshold} km without a detected drinking-water source on stage {stage} "
    "(longest: {gap} km from km {fromKm}). Carry enough water.", ("threshold", "gap", "fromKm", "toKm"))
CULTURAL_POI_SUGGESTION = register(
    "cultural_poi_suggestion", "nudge", "cultural_poi",
    "Cultural POI nearby on stage {stage}: {name} ({type}, {distance} m from route).",
    ("name", "type", "distance"))
RAILWAY_STATION_NONE_NEARBY = register(
    "railway_station_none_nearby", "nudge", "railway_station",
    "No train station within {threshold} km of the start or end of stage {stage}. Plan how you would leave "
    "the route if needed.", ("threshold",))
RAILWAY_STATION_NONE_IN_COVERED = register(
    "railway_station_none_in_covered", "nudge", "railway_station",
    "No train station within the {covered} km around the start and end of stage {stage} that the imported map "
    "covers; beyond it, up to {threshold} km, unknown.", ("threshold", "covered"))
RAILWAY_STATION_UNKNOWN = register(
    "railway_station_unknown", "nudge", "railway_station",
    "Unknown whether a train station lies within {threshold} km of the start or end of stage {stage}: the "
    "imported map does not cover there.", ("threshold",))
HEALTH_SERVICE_NONE_NEARBY = register(
    "health_service_none_nearby", "nudge", "health_service",
    "No pharmacy, hospital, or clinic detected within {threshold} km of stage {stage}. Carry a first-aid kit.",
    ("threshold",))
HEALTH_SERVICE_NONE_IN_COVERED = register(
    "health_service_none_in_covered", "nudge", "health_service",
    "No pharmacy, hospital, or clinic detected within the {covered} km around the middle of stage {stage} that "
    "the imported map covers; beyond it, up to {threshold} km, unknown. Carry a first-aid kit.",
    ("threshold", "covered"))
HEALTH_SERVICE_UNKNOWN = register(
    "health_service_unknown", "nudge", "health_service",
    "Unknown whether a pharmacy, hospital, or clinic lies within {threshold} km of stage {stage}: the imported "
    "map does not cover there.", ("threshold",))
