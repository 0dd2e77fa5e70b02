"""The thirteen tools, listed at one site: tools/list follows this order."""
from mcp.tools import (
    add_waypoint, analyze_trip, choose_accommodation, create_trip, delete_trip, edit_stages, get_stage, get_trip,
    list_trips, search_places, share_trip, unshare_trip, update_trip_settings,
)

TOOLS = tuple(module.TOOL for module in (
    list_trips, get_trip, get_stage, search_places, create_trip, update_trip_settings, edit_stages, add_waypoint,
    choose_accommodation, analyze_trip, share_trip, unshare_trip, delete_trip,
))
BY_NAME = {tool.name: tool for tool in TOOLS}
if len(BY_NAME) != len(TOOLS):
    raise RuntimeError("two tools share a name")
