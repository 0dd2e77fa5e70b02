from mcp import tool_schemas as s
from mcp.answers import ack
from trips.core.text import quote
from mcp.tools.base import Tool
from trips.services.inputs import StageAdd, StageUpdate
from trips.services import stages as stage_ops
from trips.core import i18n
from trips.errors import Invalid, Msg, N_
from trips.guards import Precondition

# action → (service, the arguments it reads, what to say)
ACTIONS = {
    "add": (stage_ops.add_stage, ("startPoint", "endPoint", "position", "label"), N_("mcp.edit.added")),
    "update": (stage_ops.update_stage, ("startPoint", "endPoint", "label", "distance"), N_("mcp.edit.updated")),
    "move": (stage_ops.move_stage, ("toIndex",), N_("mcp.edit.moved")),
    "delete": (stage_ops.delete_stage, (), N_("mcp.edit.deleted")),
    "rest_day": (stage_ops.insert_rest_day, (), N_("mcp.edit.rest_day")),
}
ADDRESSING = ("tripId", "action", "version", "stageId")


def run(ctx, args: dict) -> dict:
    action = args["action"]
    if action not in ACTIONS:
        raise Invalid({"action": Msg("mcp.edit.unknown_action", action=quote(action), actions=", ".join(ACTIONS))})
    service, reads, said = ACTIONS[action]
    stray = [k for k in args if k not in ADDRESSING and k not in reads]
    if stray:
        raise Invalid({stray[0]: Msg("mcp.edit.not_used", action=action)})
    if action != "add" and not args.get("stageId"):
        raise Invalid({"stageId": Msg("mcp.edit.stage_id_needed", action=action)})
    body = {k: args[k] for k in reads if k in args}
    pre = Precondition.exact(args["version"])
    ids = (args["tripId"],) if action == "add" else (args["tripId"], args["stageId"])
    trip = service(ctx.user, *ids, pre, body) if reads else service(ctx.user, *ids, pre)
    return answer(said, trip.version, getattr(trip, "edit_summary", None))


def answer(said: str, version: int, summary: dict | None) -> dict:
    locale = i18n.current_locale()
    return ack(Msg("mcp.edit.done", said=Msg(said), moved=moved(summary, locale)), version,
               Msg("mcp.next.pass_version"))


def moved(summary: dict | None, locale: str) -> str:
    """What the edit moved, in words of `locale`: the changed days and their distances, how a point was joined,
    the dates."""
    if not summary:
        return ""
    days = [Msg("mcp.edit.day_rest", day=d["day"]) if d["isRestDay"]
            else Msg("mcp.edit.day_km", day=d["day"], km=round(d["distanceKm"], 1)) for d in summary["changed"]]
    parts = [Msg("mcp.edit.now", days=days) if days else Msg("mcp.edit.no_route_changed")]
    if summary["how"]:
        how = i18n.join(summary["how"], locale, N_("mcp.edit.how_separator"))
        parts.append(Msg("mcp.edit.how", how=i18n.capital(how)))
    if summary["endDate"]:
        old, new = summary["endDate"]
        parts.append(Msg("mcp.edit.end_date", old=old.isoformat(), new=new.isoformat()))
    return i18n.join(parts, locale)


TOOL = Tool(
    name="edit_stages", title="Edit the days", scope="trips:write", run=run,
    locked_trip="tripId",
    description="Change a trip's days with one `action`: add, update (or cut "
                "at `distance`), move, delete (into the neighbour), rest_day (after stageId). A point moved within "
                "200 m of the route cuts it there; further off: routed, or straight "
                "(approximate). Needs the trip's version; answers the new one and what moved.",
    input_schema=s.obj({
        "tripId": s.TRIP_ID, "action": s.string("add, update, move, delete or rest_day."), "version": s.VERSION,
        "stageId": s.string("From get_trip's stages (every action but add)."),
        "position": s.integer("add: 0-based (default: last).", **s.rules(StageAdd, "position")),
        "toIndex": s.integer("move: its new 0-based place.", minimum=0),
        "startPoint": s.point("add, update: where the day starts."),
        "endPoint": s.point("add, update: where the day ends."),
        "label": s.string("add, update: the day's label.", **s.rules(StageUpdate, "label")),
        "distance": s.number("update: cut the day this many km from its start.",
                             **s.rules(StageUpdate, "distance")),
    }, required=("tripId", "action", "version")),
    output_schema=s.ACK, annotations={"destructiveHint": True},
)
