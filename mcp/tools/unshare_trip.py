from mcp import tool_schemas as s
from mcp.answers import ack
from trips.errors import Msg
from mcp.confirmation import confirmer
from mcp.tools.base import Tool
from trips.services import sharing

ACTION = Msg("mcp.confirm.unshare_trip")


def run(ctx, args: dict) -> dict:
    sharing.unshare_trip(ctx.user, args["tripId"], confirm=confirmer(ctx, args, ACTION))
    return ack(Msg("mcp.ack.unshared"))


TOOL = Tool(
    name="unshare_trip", title="Stop sharing a trip", scope="trips:write", run=run,
    description="Revoke a trip's public link. Needs a confirmation: the first call changes nothing and "
                "answers what would change." + s.data_note("Title"),
    input_schema=s.obj({"tripId": s.TRIP_ID, "confirmationToken": s.CONFIRMATION_TOKEN}, required=("tripId",)),
    output_schema=s.CHALLENGE_OR_ACK, annotations={"destructiveHint": True},
)
