from mcp import tool_schemas as s
from mcp.answers import ack
from trips.errors import Msg
from mcp.confirmation import confirmer
from mcp.tools.base import Tool
from trips.services import trips as services

ACTION = Msg("mcp.confirm.delete_trip")


def run(ctx, args: dict) -> dict:
    services.delete_trip(ctx.user, args["id"], confirm=confirmer(ctx, args, ACTION))
    return ack(Msg("mcp.ack.trip_deleted"))


TOOL = Tool(
    name="delete_trip", title="Delete a trip", scope="trips:write", run=run,
    description="Delete a trip. Needs a confirmation: the first call changes nothing and answers what would "
                "be lost." + s.data_note("Title"),
    input_schema=s.obj({"id": s.TRIP_ID, "confirmationToken": s.CONFIRMATION_TOKEN}, required=("id",)),
    output_schema=s.CHALLENGE_OR_ACK, annotations={"destructiveHint": True},
)
