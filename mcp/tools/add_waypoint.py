from mcp import tool_schemas as s
from mcp.answers import ack
from trips.errors import Msg
from mcp.tools.base import Tool
from trips.services.inputs import WaypointIn
from trips.services.waypoints import add_waypoint


def run(ctx, args: dict) -> dict:
    add_waypoint(ctx.user, args["tripId"], args["stageId"], {"lat": args["waypointLat"], "lon": args["waypointLon"]})
    return ack(Msg("mcp.ack.rerouting"), None, Msg("mcp.next.read_rerouted_day"))


TOOL = Tool(
    name="add_waypoint", title="Route a day through a place", scope="trips:write", run=run,
    locked_trip="tripId",
    description="Reroute one day through a place (within 30 km of it), in the background. The trip version "
                "does not move.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID,
                        "waypointLat": s.number("The place's latitude.", **s.rules(WaypointIn, "lat")),
                        "waypointLon": s.number("The place's longitude.", **s.rules(WaypointIn, "lon"))},
                       required=("tripId", "stageId", "waypointLat", "waypointLon")),
    output_schema=s.ACK,
)
