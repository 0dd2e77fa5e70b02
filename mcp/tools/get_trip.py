from mcp import tool_schemas as s
from mcp.kept import kept_answer, kept_reads, read_trip_digest
from mcp.tools.base import Tool

DAY = s.obj({
    "stageId": s.string("For get_stage and the edits."), "dayNumber": s.integer("1-based."), "distance": s.KM,
    "elevation": s.nullable(s.integer("Metres up.")), "isRestDay": s.REST_DAY, "startLabel": s.DAY_START, "endLabel": s.DAY_END,
    "accommodation": s.nullable(s.string("Chosen place to sleep, else \"suggested: \" the best; "
                                         "a night in its currency, ~ estimated.")),
    "alertCount": s.integer("All groups'."),
    "criticalAlerts": s.array(s.bare("string"), "Up to two, shortened."),
    "weather": s.string("Word and riding temperatures (\"rain 12–18°\"), if forecast."),
})
OUTPUT = s.obj({
    "id": s.string("Trip id."), "version": s.integer("For the edits."), **s.SETTINGS_OUT,
    "sourceUrl": s.nullable(s.string("The route link.")),
    "sourceType": s.nullable(s.string("komoot_tour, komoot_collection, strava_route, ride_with_gps, "
                                      "gpx_upload or waypoints.")),
    "routing": s.in_words("Per leg: from, to (point numbers), km, how (routed, or straight: why).", many=True),
    "status": s.string("ready, or draft with fewer than two riding days."),
    "partial": s.boolean("Work runs: ask again in a few seconds."),
    "nextAction": s.nullable(s.string("Wait, or how to recover; null: nothing to do.")),
    "isLocked": s.boolean("The trip has started: no more edits."),
    "outOfZone": s.boolean("Partly off the imported map: see nextAction."),
    "categoryStatus": s.category_status("running, done, failed or superseded"),
    "stageCount": s.DAYS, "totalDistance": s.number("Km, rest days excluded."),
    "elevationReason": s.ELEVATION_REASON,
    "budget": s.in_words("Nights' cost: totals ({currency, min, max, nights}, never converted), nights, chosen, "
                         "unknown (unpriced dayNumbers)."),
    "stages": s.array(DAY, "One line per day."),
}, required=("id", "version", "status", "partial", "stages"))

def run(ctx, args: dict) -> dict:
    return kept_answer(ctx, lambda: read_trip_digest(ctx.user, args["id"]))


TOOL = Tool(
    name="get_trip", title="Read a trip", scope="trips:read", run=run, reads=kept_reads,
    description="A trip's settings, one line per day, its budget and the version the edits need. "
                "`nextAction`: how to recover a failure (see `categoryStatus`) or which days are off the map. Null is "
                "unknown, never 0." +
                s.data_note("Title, labels, names, alerts"),
    input_schema=s.obj({"id": s.TRIP_ID}, required=("id",)),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
