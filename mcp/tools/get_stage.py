from mcp import schemas as s
from mcp.answers import stage_detail
from mcp.tools.base import Tool
from trips.services import stages

NAME = s.text("Name.")
FROM_START = s.nullable(s.number("Km from the day's start."))
HOURS = s.text("OSM opening hours.")
PLACE = s.obj({"name": NAME, "type": s.nullable(s.string("hotel, camp_site…")),
               "lat": s.number("For choose_accommodation."), "lon": s.number("For choose_accommodation."),
               "priceMin": s.nullable(s.number("€ a night, lowest.")), "priceMax": s.nullable(s.number("€ a night, highest.")),
               "isExactPrice": s.boolean("The place's own price, not an estimate."),
               "distance": s.nullable(s.number("Km from the day's end.")),
               "possibleClosed": s.boolean("May be closed that day (seasonal).")})
ALERT = s.obj({
    "code": s.string("The rule's code."), "severity": s.string("critical, warning or nudge."),
    "group": s.nullable(s.string("The analysis that raised it.")), "message": s.string("What to know." + s.DATA),
    "action": s.nullable(s.obj({
        "kind": s.string("navigate (go to lat/lon) or auto_fix (apply the value beside it)."),
        "lat": s.number("navigate: degrees."), "lon": s.number("navigate: degrees."),
        "splitAtKm": s.number("Cut the day there (edit_stages update, distance)."),
        "maxDistance": s.number("Set it as maxDistancePerDay."), "departureHour": s.integer("Set it as departureHour."),
        "afterStage": s.integer("Insert a rest day after this dayNumber.")}, description="What would help, if known.")),
})
OUTPUT = s.obj({
    "stageId": s.string("The day's id."), "dayNumber": s.integer("1-based."),
    "tripVersion": s.integer("For the edits."), "distance": s.KM, "elevation": s.integer("Metres up."),
    "elevationLoss": s.integer("Metres down."), "startPoint": s.point_out("Start."), "endPoint": s.point_out("End."),
    "isRestDay": s.REST_DAY, "label": s.text("The day's label."), "startLabel": s.DAY_START, "endLabel": s.DAY_END,
    "ridingHours": s.number("Hours on the bike."), "estimatedArrival": s.nullable(s.string("HH:MM local.")),
    "approximate": s.boolean("The route is a straight line, not routed."),
    "accommodations": s.array(PLACE, "Up to five places to sleep near the day's end, best first."),
    "selectedAccommodation": s.nullable(PLACE, "The chosen place to sleep."),
    "alertCount": s.integer("Alerts."),
    "alerts": s.array(ALERT, "Critical first; from the groups that ran."),
    "groups": s.obj({}, description="Per alert group: done, running, failed or not computed (which says nothing "
                                    "about the day, not that all is well)."),
    "categoryStatus": s.category_status("running, done or failed."),
    "resupply": s.nullable(s.array(s.obj({
        "name": NAME, "category": s.nullable(s.string("supermarket, bakery…")), "km": FROM_START,
        "openAtPassage": s.nullable(s.boolean("Open when the rider passes.")), "openingHours": HOURS}),
        "Up to six places to buy food; null: not computed.")),
    "culturalPois": s.nullable(s.array(s.obj({
        "name": NAME, "type": s.nullable(s.string("museum, castle…")), "km": FROM_START,
        "distance": s.nullable(s.integer("Metres off the route.")), "openingHours": HOURS}),
        "Up to three places to visit; null: not computed.")),
    "terrain": s.nullable(s.obj({}, description="Km of rough surface and main road, steepest gradient, share on "
                                                "the map; null: not computed.")),
    "weather": s.nullable(s.obj({
        "date": s.string("YYYY-MM-DD."), "description": s.string("rain, partly cloudy…"),
        "icon": s.string("Icon name (01d…)."), "weatherCode": s.nullable(s.integer("WMO code.")),
        "tempMin": s.number("°C."), "tempMax": s.number("°C."),
        "apparentTempMin": s.nullable(s.number("°C.")), "apparentTempMax": s.nullable(s.number("°C.")),
        "windSpeed": s.nullable(s.number("km/h.")), "windGusts": s.nullable(s.number("km/h.")),
        "windDirection": s.nullable(s.string("From: N, NE, E, SE, S, SO, O (west), NO.")),
        "relativeWindDirection": s.string("headwind, tailwind, crosswind or unknown."),
        "precipitationProbability": s.nullable(s.number("%.")), "precipitationMm": s.nullable(s.number("mm.")),
        "humidity": s.nullable(s.number("%.")), "uvIndex": s.nullable(s.integer("Highest.")),
        "comfortIndex": s.integer("0–100; 40 or less is poor for cycling.")},
        description="Over the riding hours (extremes, totals); null: see weatherAvailability.")),
    "weatherAvailability": s.nullable(s.string(
        "available, past, beyond_horizon (over 16 days ahead) or unavailable (none from the weather service); "
        "null on an undated trip or while fetched.")),
}, required=("stageId", "dayNumber", "distance", "alerts", "groups"))

def run(ctx, args: dict) -> dict:
    stage = stages.get_stage(ctx.user, args["tripId"], args["stageId"])
    return stage_detail(stage.trip, stage)


TOOL = Tool(
    name="get_stage", title="Read one day", scope="trips:read", run=run,
    description="One day in full: distances, climbing, ends, places to sleep with their prices, food along "
                "the way, alerts, weather, and which analyses ran (`groups`). Never the route's coordinates.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID}, required=("tripId", "stageId")),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
