from mcp import tool_schemas as s
from mcp.answers import ack
from trips.errors import Msg
from mcp.confirmation import confirmer
from mcp.tools.base import Tool
from trips.services import trips as services
from trips.guards import Precondition

ACTION = Msg("mcp.confirm.update_trip_settings")


def run(ctx, args: dict) -> dict:
    data = {k: v for k, v in args.items() if k not in ("id", "version", "confirmationToken")}
    trip = services.update_trip_settings(ctx.user, args["id"], Precondition.exact(args["version"]), data,
                                         confirm=confirmer(ctx, args, ACTION))
    if trip.version > args["version"]:
        return ack(Msg("mcp.ack.settings_recut"), trip.version, Msg("mcp.next.read_new_days"))
    return ack(Msg("mcp.ack.settings_kept_days"), trip.version)


TOOL = Tool(
    name="update_trip_settings", title="Change a trip's settings", scope="trips:write", run=run,
    locked_trip="id",
    description="Change the settings given. New pacing or dates recut every day and need a confirmation: the "
                "first call changes nothing and says what would; others apply at once. Needs the trip's version. "
                "A new route is a new trip." + s.data_note("Title"),
    input_schema=s.obj({"id": s.TRIP_ID, "version": s.VERSION, "confirmationToken": s.CONFIRMATION_TOKEN,
                        **s.SETTINGS}, required=("id", "version")),
    output_schema=s.CHALLENGE_OR_ACK, annotations={"destructiveHint": True},
)
