from mcp import tool_schemas as s
from mcp.kept import kept_answer, kept_reads, list_page
from mcp.tools.base import Tool
from trips.services.inputs import TripListQuery
from trips.services import trip_reads

ITEM = s.obj({
    "id": s.string("Trip id."), "title": s.TITLE, "startDate": s.FIRST_DAY, "endDate": s.LAST_DAY,
    "totalDistance": s.KM, "stageCount": s.DAYS, "createdAt": s.string("ISO 8601, UTC."),
    "updatedAt": s.string("ISO 8601, UTC."), "status": s.string("draft, analyzing, analyzed or failed."),
})

def run(ctx, args: dict) -> dict:
    query = {k: str(v) for k, v in args.items()}
    query["itemsPerPage"] = str(min(int(args.get("itemsPerPage", 20)), 30))  # clamped, not refused
    return kept_answer(ctx, lambda: list_page(trip_reads.list_trips(ctx.user, query)))


TOOL = Tool(
    name="list_trips", title="List my trips", scope="trips:read", run=run, reads=kept_reads,
    description="The user's trips, newest first, 20 a page (30 at most)." + s.data_note("Titles"),
    input_schema=s.obj({
        "page": s.integer("From 1.", **s.rules(TripListQuery, "page")),
        "itemsPerPage": s.integer("Default 20; more than 30 counts as 30.",
                                  **s.rules(TripListQuery, "itemsPerPage", omit=("maximum",))),
        "title": s.string("Trips whose title contains it (any case).",
                           **s.rules(TripListQuery, "title")),
        "startDate": s.string("Trips starting on or after it.", format="date"),
        "endDate": s.string("Trips ending on or before it.", format="date"),
    }),
    output_schema=s.obj({"member": s.array(ITEM, "This page's trips."), "totalItems": s.integer("All matches."),
                         "page": s.integer("1-based."), "itemsPerPage": s.integer("Page size.")},
                        required=("member", "totalItems")),
    annotations={"readOnlyHint": True},
)
