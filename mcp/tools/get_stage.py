from mcp import schemas as s
from mcp.answers import stage_detail
from mcp.tools.base import Tool
from trips.services import stages

PLACE = s.obj({"name": s.nullable(s.string("Its name." + s.DATA)), "type": s.string("Its kind."),
               "lat": s.number("Latitude."), "lon": s.number("Longitude.")})
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
    "accommodations": s.array(PLACE, "Places to sleep near the day's end."),
    "selectedAccommodation": s.nullable(PLACE),
    "weather": s.nullable(s.obj({}, description="The forecast, when known.")),
    "alerts": s.array(s.obj({}), "Alerts about the day." + s.DATA),
    "events": s.array(s.obj({}), "Events along the day." + s.DATA),
    "resupply": s.nullable(s.obj({}, description="Where to find food and water.")),
}, required=("stageId", "dayNumber", "distance"))


def run(ctx, args: dict) -> dict:
    stage = stages.get_stage(ctx.user, args["tripId"], args["stageId"])
    return stage_detail(stage.trip, stage)


TOOL = Tool(
    name="get_stage", title="Read one day", scope="trips:read", run=run,
    description="One day in full: distances, climbing, ends, places to sleep, alerts. Never the route's "
                "coordinates.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID}, required=("tripId", "stageId")),
    output_schema=OUTPUT, annotations={"readOnlyHint": True},
)
