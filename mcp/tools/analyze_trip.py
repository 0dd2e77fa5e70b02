from mcp import tool_schemas as s
from mcp.answers import ack
from trips.errors import Msg
from mcp.tools.base import Tool
from trips.services.analysis import analyze_trip


def run(ctx, args: dict) -> dict:
    analyze_trip(ctx.user, args["id"])
    return ack(Msg("mcp.ack.analysis_started"), None, Msg("mcp.next.read_category_status"))


TOOL = Tool(
    name="analyze_trip", title="Analyze a trip", scope="trips:write", run=run,
    locked_trip="id",
    description="Analyse every day (again): places to sleep, supplies, weather, terrain, alerts. Answers at "
                "once; the work runs in the background.",
    input_schema=s.obj({"id": s.TRIP_ID}, required=("id",)),
    output_schema=s.ACK,
)
