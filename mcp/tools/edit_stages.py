from mcp import tool_schemas as s
from mcp.answers import ack
from trips.core.text import quote
from mcp.tools.base import Tool
from trips.services.inputs import StageAdd, StageUpdate
from trips.services import rename as renaming, stages as stage_ops
from mcp.arguments import check_arguments, plain_checked
from trips.errors import DomainError, Invalid
from trips.guards import Precondition

# action → (service, the arguments it reads, what to say)
ACTIONS = {
    "add": (stage_ops.add_stage, ("startPoint", "endPoint", "position", "label"),
            "A day has been inserted. The days after it have moved, and their dates with them."),
    "update": (stage_ops.update_stage, ("startPoint", "endPoint", "label", "distance"), "The day has been changed."),
    "move": (stage_ops.move_stage, ("toIndex",),
             "The day has been moved. Every day between its old and new places has been renumbered."),
    "delete": (stage_ops.delete_stage, (), "The day has been removed and merged with the one beside it."),
    "rest_day": (stage_ops.insert_rest_day, (), "A rest day has been inserted after the day; every later date "
                                                "has moved by one."),
}
ADDRESSING = ("tripId", "action", "version", "stageId")


def run(ctx, args: dict) -> dict:
    action = args["action"]
    if action not in ACTIONS:
        raise Invalid({"action": f"Unknown action {quote(action)}. Expected one of: {', '.join(ACTIONS)}."})
    service, reads, said = ACTIONS[action]
    stray = [k for k in args if k not in ADDRESSING and k not in reads]
    if stray:
        raise Invalid({stray[0]: f"is not used by the {action} action"})
    if action != "add" and not args.get("stageId"):
        raise Invalid({"stageId": f"The {action} action needs the stageId of the day, as published by get_trip."})
    body = {k: args[k] for k in reads if k in args}
    pre = Precondition.exact(args["version"])
    ids = (args["tripId"],) if action == "add" else (args["tripId"], args["stageId"])
    trip = service(ctx.user, *ids, pre, body) if reads else service(ctx.user, *ids, pre)
    return answer(said, trip.version, getattr(trip, "edit_summary", None))


RENAME_ARGUMENTS = frozenset({*ADDRESSING, "label"})


def rename(ctx, arguments) -> dict | None:
    """The fast path of `update` with nothing but a label (Tool.fast_path): one conditional write
    (trips/services/rename.py rename_stage). None, having written nothing, for any other call, or any call that
    write does not settle: the whole path then answers it, refusals in the guards' order."""
    if not isinstance(arguments, dict) or arguments.keys() != RENAME_ARGUMENTS or arguments.get("action") != "update":
        return None
    if ctx.read_values is None:  # the budgets' round trip found no Redis: the epochs could not be replaced after the
        return None  # write, so the whole path answers (its trip lock refuses while Redis is away: "unavailable")
    args = plain_checked(TOOL, arguments)  # the label is new on every call: judged by hand, not by jsonschema
    if args is None:
        try:
            args = check_arguments(TOOL, arguments)
        except DomainError:
            return None
    version = renaming.rename_stage(ctx.principal.user_id, args["tripId"], args["stageId"],
                                    Precondition.exact(args["version"]), args["label"])
    if version is None:
        return None
    return answer(ACTIONS["update"][2], version, renaming.NO_DAY_MOVED)


def answer(said: str, version: int, summary: dict | None) -> dict:
    return ack(f"{said} {moved(summary)}".strip(), version,
               "Pass the version above to the next edit; no need to read the trip again.")


def moved(summary: dict | None) -> str:
    """What the edit moved, in words: the changed days and their distances, how a point was joined, the dates."""
    if not summary:
        return ""
    days = [f"day {d['day']} " + ("is a rest day" if d["isRestDay"] else f"is {d['distanceKm']:.1f} km")
            for d in summary["changed"]]
    text = ("Now " + ", ".join(days) + ".") if days else "No day's route changed."
    if summary["how"]:
        how = "; ".join(summary["how"])
        text += f" {how[0].upper()}{how[1:]}."
    if summary["endDate"]:
        old, new = summary["endDate"]
        text += f" The end date moved from {old.isoformat()} to {new.isoformat()}."
    return text


TOOL = Tool(
    name="edit_stages", title="Edit the days", scope="trips:write", run=run,
    locked_trip="tripId",
    description="Change a trip's days with one `action`: add, update (or cut "
                "at `distance`), move, delete (merges into the neighbour), rest_day (after stageId). A moved point "
                "within 200 m of the route cuts it there, the neighbour taking the rest; further off it is routed, "
                "or joined straight (approximate). Needs the trip's version; answers the new one and what moved.",
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
    output_schema=s.ACK, annotations={"destructiveHint": True}, fast_path=rename,
)
