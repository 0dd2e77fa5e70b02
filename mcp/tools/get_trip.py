from mcp import schemas as s
from mcp.answers import trip_digest
from mcp.tools.base import Tool
from trips.services import trips as services

DAY = s.obj({
    "stageId": s.string("The day's id, for get_stage and the edits."), "dayNumber": s.integer("1-based."),
    "distance": s.number("Kilometres."), "elevation": s.integer("Metres of climbing."),
    "isRestDay": s.boolean("A day without riding."),
    "startLabel": s.nullable(s.string("Where the day starts." + s.DATA)),
    "endLabel": s.nullable(s.string("Where the day ends." + s.DATA)),
    "accommodation": s.nullable(s.string("The chosen place to sleep, else \"suggested: \" and the best "
                                         "candidate near the day's end, with the estimated € per night." + s.DATA)),
    "alertCount": s.integer("Alerts on this day, every group (get_stage lists them)."),
    "criticalAlerts": s.array(s.string("A critical alert." + s.DATA),
                              "The critical alerts' messages (at most three, shortened)."),
    "weather": s.string("The forecast in a word and the riding temperatures (\"rain 12–18°\"); absent "
                        "without one (get_stage's weatherAvailability says why)."),
})
OUTPUT = s.obj({
    "id": s.string("The trip's id."), "version": s.integer("Pass it to the edits."),
    **{k: s.nullable(v) if k in ("title", "startDate", "endDate") else v for k, v in s.SETTINGS.items()},
    "sourceUrl": s.nullable(s.string("The route link the trip came from.")),
    "sourceType": s.nullable(s.string("komoot_tour, komoot_collection, strava_route, ride_with_gps or "
                                      "gpx_upload.")),
    "status": s.string("ready, or draft while the trip has fewer than two riding days."),
    "partial": s.boolean("True only while something is still running or queued: ask again in a few seconds. "
                         "False once everything settled, failures included."),
    "nextAction": s.nullable(s.string("What to do now: wait, or how to recover from a failure (its reason "
                                      "included); null when nothing is needed.")),
    "isLocked": s.boolean("True once the trip has started: it can no longer be edited."),
    "outOfZone": s.boolean("True when the route leaves the imported map areas: the map-based analyses cover "
                           "only the part inside them."),
    "categoryStatus": s.array(s.obj({"category": s.string("A family of computations."),
                                     "status": s.string("running, done, failed or superseded."),
                                     "reason": s.nullable(s.string("Why it failed (failed only)."))}),
                              "Where each family of computations stands."),
    "stageCount": s.integer("Days."), "totalDistance": s.number("Kilometres, rest days excluded."),
    "stages": s.array(DAY, "One line per day."),
}, required=("id", "version", "status", "partial", "stages"))


def run(ctx, args: dict) -> dict:
    return trip_digest(services.get_trip(ctx.user, args["id"]))


TOOL = Tool(
    name="get_trip", title="Read a trip", scope="trips:read", run=run,
    description="A trip's settings and one line per day, with the version the edits need. While `partial` "
                "is true something is still being worked out: ask again in a few seconds. When a computation "
                "failed, `categoryStatus` carries its reason and `nextAction` says how to recover.",
    input_schema=s.obj({"id": s.TRIP_ID}, required=("id",)),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
