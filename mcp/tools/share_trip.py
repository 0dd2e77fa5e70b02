from mcp import tool_schemas as s
from mcp.tools.base import Tool
from trips.services import sharing


def run(ctx, args: dict) -> dict:
    share, _ = sharing.share_trip(ctx.user, args["tripId"])
    return {"url": sharing.share_url(share), "shortCode": share.short_code,
            "createdAt": share.created_at.isoformat() + "Z"}


TOOL = Tool(
    name="share_trip", title="Share a trip", scope="trips:write", run=run,
    description="Publish a read-only link to a trip (anyone with it can see the days). Again: the same "
                "link.",
    input_schema=s.obj({"tripId": s.TRIP_ID}, required=("tripId",)),
    output_schema=s.obj({"url": s.string("The public link."), "shortCode": s.string("Its code."),
                         "createdAt": s.string("ISO 8601, UTC.")}, required=("url", "shortCode")),
)
