"""The thirteen tools, listed at one site: tools/list follows this order. The app serves a Registry of them
(mcp/endpoint.py init_app); the dispatcher reads it from the app, never from this module."""
from __future__ import annotations

from collections.abc import Iterable

from mcp.tools import (
    add_waypoint, analyze_trip, choose_accommodation, create_trip, delete_trip, edit_stages, get_stage, get_trip,
    list_trips, search_places, share_trip, unshare_trip, update_trip_settings,
)
from mcp.tools.base import Tool


class Registry:
    """The tools one app serves, in tools/list order. Raises ValueError when two share a name."""

    def __init__(self, tools: Iterable[Tool]):
        self.tools = tuple(tools)
        self.by_name = {tool.name: tool for tool in self.tools}
        if len(self.by_name) != len(self.tools):
            raise ValueError("two tools share a name")


TOOLS = tuple(module.TOOL for module in (
    list_trips, get_trip, get_stage, search_places, create_trip, update_trip_settings, edit_stages, add_waypoint,
    choose_accommodation, analyze_trip, share_trip, unshare_trip, delete_trip,
))
PRODUCT = Registry(TOOLS)  # what app.py serves
BY_NAME = PRODUCT.by_name
