from mcp import tool_schemas as s
from mcp.answers import stage_detail
from mcp.tools.base import Tool
from trips.enrich.alerts.catalogue import GROUPS
from trips.services import stages

# Detail an agent reads rather than acts on is typed {"type": "object"} with its fields in words (mcp/tool_schemas.py
# in_words); what it acts on stays typed (stageId, dayNumber, tripVersion), and the words say that a place's lat/lon
# are what choose_accommodation takes.
PLACE_FIELDS = ("name, type, lat/lon (choose_accommodation's), price ({min, max, currency} a night, "
                "estimate; null: see priceNote), distance (km from the day's end), possibleClosed (that day), phone, "
                "website, address")
OUTPUT = s.obj({
    "stageId": s.string("The day's id."), "dayNumber": s.integer("1-based."),
    "tripVersion": s.integer("For the edits."), "distance": s.KM, "elevation": s.nullable(s.integer("Metres up.")),
    "elevationLoss": s.nullable(s.integer("Metres down.")), "elevationReason": s.ELEVATION_REASON,
    "startPoint": s.point_out("Start"), "endPoint": s.point_out("End"),
    "isRestDay": s.REST_DAY, "label": s.nullable(s.string("The day's.")), "startLabel": s.DAY_START,
    "endLabel": s.DAY_END,
    "ridingHours": s.number("Hours."), "estimatedArrival": s.nullable(s.string("HH:MM local.")),
    "approximate": s.boolean("Partly straight, not routed."),
    "accommodations": s.in_words(f"Up to five, best first: {PLACE_FIELDS}.",
                                 many=True),
    "selectedAccommodation": s.in_words("Chosen, or null: name, type, lat, lon, price (min, max, currency, "
                                        "estimate), priceNote, distance, possibleClosed, phone, website, address.",
                                        null=True),
    "alertCount": s.integer("Alerts."),
    "alerts": s.in_words("Critical first: code, severity, group, message, action (null, or kind navigate: lat/lon; "
                         "auto_fix: splitAtKm (edit_stages update distance), maxDistance (maxDistancePerDay), "
                         "departureHour, or afterStage (a rest_day after it)).",
                         many=True),
    "groups": s.in_words(f"Per group ({', '.join(GROUPS)}): done, partial (see mapCoverage), running, "
                         "failed, off map or not computed."),
    "mapCoverage": s.in_words("share (0–1), offMapKm ([from, to] km off the map).", null=True),
    "categoryStatus": s.category_status("running, done or failed"),
    "resupply": s.in_words("Six food places, groceries first: name, category, km, openAtPassage (null: unknown), "
                           "openingHours.", null=True, many=True),
    "supplyTimeline": s.nullable(s.array(s.bare("string"), "Food every 500 m: \"km: categories\".")),
    "waterPoints": s.in_words("Drinking water: km, kind, name.", null=True, many=True),
    "bikeShops": s.in_words("Within 2 km: km, kind (repair, shop, repair_station), name, phone.",
                            null=True, many=True),
    "railwayStations": s.in_words("Nearest ≤ 10 km of start and end: end, name, distance (km); null: not "
                                  "computed.", null=True, many=True),
    "culturalPois": s.in_words("Three places to visit: name, type, km, distance (m off the route), "
                               "openingHours.", null=True, many=True),
    "terrain": s.in_words("roughKm, mainRoadKm, steepestPct (%; null: no elevation), mapCoverage (0–1); null: not "
                          "computed.", null=True),
    "ways": s.in_words("surfaces, wayTypes (\"kind km, …\"), cues (\"km turn street\"), reason (why null)."),
    "weather": s.in_words("date, description, weatherCode (WMO), tempMin/tempMax, "
                          "apparentTempMin/apparentTempMax (°C), windSpeed/windGusts (km/h), windDirection (from), "
                          "relativeWindDirection, precipitationProbability, humidity (%), precipitationMm, uvIndex, "
                          "comfortIndex (0–100), hourly (rows: hour, °C, rain %, wind km/h, WMO).", null=True),
    "profile": s.in_words("samples ([km, m], ≤ 64), climbs (startKm, lengthKm, gain in m, meanPct, steepestPct, "
                          "category: 4…1, HC); null: no elevation.", null=True),
    "weatherAvailability": s.nullable(s.string(
        "available, past, beyond_horizon (16+ days ahead), unavailable; null: undated or being fetched.")),
}, required=("stageId", "dayNumber", "distance", "alerts", "groups"))

def run(ctx, args: dict) -> dict:
    stage = stages.get_stage(ctx.user, args["tripId"], args["stageId"])
    return stage_detail(stage.trip, stage)


TOOL = Tool(
    name="get_stage", title="Read one day", scope="trips:read", run=run,
    description="One day in full: places to sleep, food, water, bike shops, stations, alerts, weather, terrain, "
                "ways, climbs, which analyses ran (`groups`). Null is unknown, never 0." +
                s.data_note("Names, labels, opening hours, alert messages"),
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID}, required=("tripId", "stageId")),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
