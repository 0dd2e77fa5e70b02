from mcp import tool_schemas as s
from mcp.tools.base import Tool
from trips.services import places

PLACE = s.obj({"name": s.string("Name."), "lat": s.number("Degrees."), "lon": s.number("Degrees."),
               "displayName": s.string("Full name."), "type": s.string("city, village…")})


def run(ctx, args: dict) -> dict:
    return places.search_places(ctx.user, {k: v for k, v in args.items()})


TOOL = Tool(
    name="search_places", title="Find a place", scope="trips:read", run=run,
    description="Find a town, pass or landmark by name: coordinates for the edits and create_trip." +
                s.data_note("Names"),
    input_schema=s.obj({"q": s.string("What to look for.", minLength=1, maxLength=200),
                        "limit": s.integer("How many results (default 5).", minimum=1, maximum=10)},
                       required=("q",)),
    output_schema=s.obj({"member": s.array(PLACE, "Matches, best first."), "totalItems": s.integer("All matches.")},
                        required=("member", "totalItems")),
    annotations={"readOnlyHint": True, "openWorldHint": True},
)
