from mcp import tool_schemas as s
from trips.core import i18n
from mcp.answers import ack
from trips.errors import Msg
from mcp.tools.base import Tool
from mcp.tools.edit_stages import moved
from trips.services.inputs import AccommodationChoice
from trips.services import accommodations
from trips.guards import Precondition


def run(ctx, args: dict) -> dict:
    body = {"lat": args.get("selectedAccommodationLat"), "lon": args.get("selectedAccommodationLon")}
    trip = accommodations.choose_accommodation(ctx.user, args["tripId"], args["stageId"],
                                          Precondition.exact(args["version"]), body)
    locale = i18n.current_locale()
    if body["lat"] is None:
        return ack(Msg("mcp.edit.done", said=Msg("mcp.ack.choice_cleared"), moved=moved(trip.edit_summary, locale)),
                   trip.version)
    return ack(Msg("mcp.edit.done", said=Msg("mcp.ack.lodging_chosen"), moved=moved(trip.edit_summary, locale)),
               trip.version, Msg("mcp.next.read_day"))


TOOL = Tool(
    name="choose_accommodation", title="Choose where to sleep", scope="trips:write", run=run,
    locked_trip="tripId",
    description="Choose a day's accommodation by its coordinates (from get_stage), or leave both "
                "out to clear the choice. Needs the trip's version; answers the new one.",
    input_schema=s.obj({"tripId": s.TRIP_ID, "stageId": s.STAGE_ID, "version": s.VERSION,
                        "selectedAccommodationLat": s.number("The place's latitude.", **s.rules(AccommodationChoice, "lat")),
                        "selectedAccommodationLon": s.number("The place's longitude.", **s.rules(AccommodationChoice, "lon"))},
                       required=("tripId", "stageId", "version")),
    output_schema=s.ACK,
)
