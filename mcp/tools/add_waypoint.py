from mcp import tool_schemas as s
from mcp.answers import ack
from mcp.tools.base import Tool
from trips.services.inputs import WaypointIn
from trips.services.waypoints import add_waypoint


def run(ctx, args: dict) -> dict:
    add_waypoint(ctx.user, args["tripId"], args["stageId"], {"lat": args["waypointLat"], "lon": args["waypointLon"]})
    return ack("The day is being rerouted through that place. Its distance and climbing change once the new "
               "route comes back.", None,
               "Call get_stage for this day in a little while to see the new route. The trip version has not "
               "moved: the one you have is still good for the next edit.")


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
