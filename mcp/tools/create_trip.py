from mcp import tool_schemas as s
from mcp.answers import ack
from mcp.idempotency import check_explicit_key, derived_keys
from mcp.tools.base import Tool
from trips.services.inputs import TripCreate
from trips.errors import Msg
from trips.services import idempotency, trips as services


def run(ctx, args: dict) -> dict:
    data = {k: v for k, v in args.items() if k != "idempotencyKey"}
    if "idempotencyKey" in args:
        key = check_explicit_key(args["idempotencyKey"])
    else:
        key, previous = derived_keys(ctx.user.id, ctx.tool, data)
        earlier = idempotency.created_before(ctx.user, data, previous)  # a retry just past a bucket boundary
        if earlier is not None:
            return answer(earlier.id)
    trip, _ = services.create_trip(ctx.user, data, key)
    return answer(trip.id)


def answer(trip_id: str) -> dict:
    return {"id": trip_id, **ack(Msg("mcp.ack.trip_created"), None, Msg("mcp.next.read_created_trip", id=trip_id))}


TOOL = Tool(
    name="create_trip", title="Create a trip", scope="trips:write", run=run,
    on_refused=lambda ctx: services.spend_on_refusal(ctx.user),
    description="Create a multi-day trip from a route link (Komoot tour or collection, Strava or RideWithGPS route) "
                "or from waypoints, routed on BTP's map (search_places gives a place's). Answers at once; days "
                "are cut in the background. The same call within minutes answers the same trip.",
    input_schema=s.obj({
        "sourceUrl": s.string("The route link (https).", **s.rules(TripCreate, "sourceUrl")),
        "waypoints": {**s.in_words("Or: points to ride through, in order: lat, lon.", many=True),
                      **s.rules(TripCreate, "waypoints")},
        **s.SETTINGS,
        "idempotencyKey": s.string("16 to 255 letters, digits, - or _; the same key answers the "
                                   "same trip for 24 h."),
    }),
    output_schema=s.obj({"id": s.string("The new trip's id."), "result": s.RESULT,
                         "nextAction": s.string("What to call next.")}, required=("id", "result", "nextAction")),
)
