from mcp import schemas as s
from mcp.answers import stage_detail
from mcp.tools.base import Tool
from trips.services import stages

GROUP_STATUS = s.string("done, running, failed, or not computed (never ran: say nothing about it).")
PLACE = s.obj({"name": s.nullable(s.string("Its name." + s.DATA)), "type": s.nullable(s.string("Its kind.")),
               "lat": s.number("Latitude (pass it to choose_accommodation)."), "lon": s.number("Longitude."),
               "priceMin": s.nullable(s.number("Estimated € per night, lowest.")),
               "priceMax": s.nullable(s.number("Estimated € per night, highest.")),
               "isExactPrice": s.boolean("True when the price is the place's own, false for an estimate."),
               "distance": s.nullable(s.number("Kilometres from the day's end.")),
               "possibleClosed": s.boolean("True when it may be closed on the day's date (seasonal).")})
ALERT = s.obj({
    "code": s.string("The alert's code (one per rule)."),
    "severity": s.string("critical, warning or nudge."),
    "group": s.nullable(s.string("The analysis that raised it.")),
    "message": s.string("What to know." + s.DATA),
    "action": s.nullable(s.obj({"kind": s.string("navigate (to lat/lon) or auto_fix.")},
                               description="What would help, when known.")),
})
NAMED = s.nullable(s.string("Its name." + s.DATA))
HOURS = s.nullable(s.string("Its OSM opening hours." + s.DATA))
OUTPUT = s.obj({
    "stageId": s.string("The day's id."), "dayNumber": s.integer("1-based."), "tripVersion": s.integer("Trip version."),
    "distance": s.number("Kilometres."), "elevation": s.integer("Metres up."), "elevationLoss": s.integer("Metres down."),
    "startPoint": s.POINT_OUT, "endPoint": s.POINT_OUT, "isRestDay": s.boolean("A day without riding."),
    "label": s.nullable(s.string("The day's label." + s.DATA)),
    "startLabel": s.nullable(s.string("Where it starts." + s.DATA)),
    "endLabel": s.nullable(s.string("Where it ends." + s.DATA)),
    "ridingHours": s.number("Estimated hours on the bike."),
    "estimatedArrival": s.nullable(s.string("Estimated arrival, HH:MM local.")),
    "approximate": s.boolean("True when the route is a straight detour, not a routed one."),
    "accommodations": s.array(PLACE, "Up to five places to sleep near the day's end, best first."),
    "selectedAccommodation": s.nullable(PLACE),
    "alertCount": s.integer("Alerts on this day."),
    "alerts": s.array(ALERT, "Alerts about the day, critical first. Only the groups that ran (see `groups`)."),
    "groups": s.obj({}, description="Per alert group: done, running, failed or not computed. A group that was "
                                    "not computed says nothing about the day, not that all is well."),
    "categoryStatus": s.array(s.obj({"category": s.string("A family of computations."),
                                     "status": s.string("running, done or failed."),
                                     "reason": s.nullable(s.string("Why it failed (failed only)."))}),
                              "Where each family of computations stands."),
    "resupply": s.nullable(s.array(s.obj({
        "name": NAMED, "category": s.nullable(s.string("supermarket, bakery, cafe…")),
        "km": s.nullable(s.number("Kilometres from the day's start.")),
        "openAtPassage": s.nullable(s.boolean("Open when the rider passes; null when unknown.")),
        "openingHours": HOURS}), "Up to six places to buy food along the day; null when not computed.")),
    "culturalPois": s.nullable(s.array(s.obj({
        "name": NAMED, "type": s.nullable(s.string("museum, castle, viewpoint…")),
        "km": s.nullable(s.number("Kilometres from the day's start.")),
        "distance": s.nullable(s.integer("Metres from the route.")), "openingHours": HOURS}),
        "Up to three places to visit near the route; null when not computed.")),
    "terrain": s.nullable(s.obj({}, description="Kilometres of rough surface and main road, the steepest "
                                                "gradient, the share of the day on the map; null when not computed.")),
    "weather": s.nullable(s.obj({
        "date": s.string("The day's date, YYYY-MM-DD."), "description": s.string("rain, partly cloudy…"),
        "icon": s.string("An OpenWeather-style icon name (01d…)."),
        "weatherCode": s.nullable(s.integer("WMO weather code of the middle riding hour.")),
        "tempMin": s.number("°C while riding, lowest."), "tempMax": s.number("°C while riding, highest."),
        "apparentTempMin": s.nullable(s.number("Feels like, °C, lowest.")),
        "apparentTempMax": s.nullable(s.number("Feels like, °C, highest.")),
        "windSpeed": s.nullable(s.number("km/h, highest.")), "windGusts": s.nullable(s.number("km/h, highest.")),
        "windDirection": s.nullable(s.string("Where the wind blows from: N, NE, E, SE, S, SO, O (west), NO.")),
        "relativeWindDirection": s.string("headwind, tailwind, crosswind or unknown, for the day's direction."),
        "precipitationProbability": s.nullable(s.number("%, highest.")),
        "precipitationMm": s.nullable(s.number("mm while riding.")),
        "humidity": s.nullable(s.number("%.")), "uvIndex": s.nullable(s.integer("UV index, highest.")),
        "comfortIndex": s.integer("0–100: 40 or less is poor for cycling.")},
        description="The forecast over the riding hours; null when there is none (see weatherAvailability).")),
    "weatherAvailability": s.nullable(s.string(
        "Why there is no forecast: past, beyond_horizon (over 16 days ahead) or unavailable (the weather service "
        "gave none); available with one; null on an undated trip or while it is fetched.")),
}, required=("stageId", "dayNumber", "distance", "alerts", "groups"))


def run(ctx, args: dict) -> dict:
    stage = stages.get_stage(ctx.user, args["tripId"], args["stageId"])
    return stage_detail(stage.trip, stage)


TOOL = Tool(
    name="get_stage", title="Read one day", scope="trips:read", run=run,
    description="One day in full: distances, climbing, ends, places to sleep with their prices, food along "
                "the way, alerts, and which analyses ran (`groups`). Never the route's coordinates.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID}, required=("tripId", "stageId")),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
