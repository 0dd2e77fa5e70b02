from mcp import tool_schemas as s
from mcp.answers import ack
from mcp.confirmation import confirmer
from mcp.tools.base import Tool
from trips.services import sharing

ACTION = ("Revoke the public link to this trip: anyone holding the address loses access at once. The trip "
          "itself is untouched; a new link can be made later, at a different address.")


def run(ctx, args: dict) -> dict:
    sharing.unshare_trip(ctx.user, args["tripId"], confirm=confirmer(ctx, args, ACTION))
    return ack("The share link has been revoked. The address no longer works, for anyone.")


TOOL = Tool(
    name="unshare_trip", title="Stop sharing a trip", scope="trips:write", run=run,
    description="Revoke a trip's public link. Needs a confirmation: the first call changes nothing and "
                "answers what would change.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "confirmationToken": s.CONFIRMATION_TOKEN}, required=("tripId",)),
    output_schema=s.CHALLENGE_OR_ACK, annotations={"destructiveHint": True},
)
