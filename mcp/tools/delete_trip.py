from mcp import tool_schemas as s
from mcp.answers import ack
from mcp.confirmation import confirmer
from mcp.tools.base import Tool
from trips.services import trips as services

ACTION = ("Delete this trip for good, with every day computed for it and any public link to it. Nothing of "
          "it can be recovered afterwards.")


def run(ctx, args: dict) -> dict:
    services.delete_trip(ctx.user, args["id"], confirm=confirmer(ctx, args, ACTION))
    return ack("The trip is deleted, with its days and any share link. This cannot be undone.")


TOOL = Tool(
    name="delete_trip", title="Delete a trip", scope="trips:write", run=run,
    description="Delete a trip. Needs a confirmation: the first call changes nothing and answers what would "
                "be lost.",
    input_schema=s.obj({"id": s.TRIP_ID, "confirmationToken": s.CONFIRMATION_TOKEN}, required=("id",)),
    output_schema=s.CHALLENGE_OR_ACK, annotations={"destructiveHint": True},
)
