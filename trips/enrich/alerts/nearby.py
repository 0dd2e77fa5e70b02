"""Services near each day (docs/RULES.md "Alert catalogue"): bike shops, drinking water, cultural places, railway
stations, health services. One group each."""
from trips.enrich.alerts.catalogue import register

BIKE_SHOP_NONE_NEARBY = register(
    "bike_shop_none_nearby", "nudge", "bike_shop",
    "No bike shops detected on stage {stage}. Carry a repair kit and spare parts.")
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
HEALTH_SERVICE_NONE_NEARBY = register(
    "health_service_none_nearby", "nudge", "health_service",
    "No pharmacy, hospital, or clinic detected within {threshold} km of stage {stage}. Carry a first-aid kit.",
    ("threshold",))
