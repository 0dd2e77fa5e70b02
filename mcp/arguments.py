"""Tool arguments: unknown names refused by name, `version` judged in its own words, types checked against
the published input schema. Messages name the argument and never echo an unbounded value."""
from __future__ import annotations

import math
import sys

from jsonschema import Draft202012Validator

from trips.core.text import bounded, quote
from trips.errors import Invalid, Msg, N_, Plural

VERSION_MISSING = N_("mcp.version_missing")
VERSION_STAR = N_("mcp.version_star")
VERSION_MALFORMED = N_("mcp.version_malformed")
NOT_FINITE = N_("mcp.not_finite")
_FLOAT_MAX = sys.float_info.max


def parse_version(value) -> int:
    """Raises Invalid({"version": …}) when absent, `*` or not a whole number (numeric strings accepted)."""
    if value is None or value == "":
        raise Invalid({"version": Msg(VERSION_MISSING)})
    if value == "*":
        raise Invalid({"version": Msg(VERSION_STAR)})
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise Invalid({"version": Msg(VERSION_MALFORMED)})


# What a JSON Schema keyword's refusal says (the schema's own bound or type filled in).
SCHEMA_WORDS = {
    "type": N_("mcp.schema.type"), "minimum": N_("mcp.schema.minimum"),
    "exclusiveMinimum": N_("mcp.schema.exclusive_minimum"), "maximum": N_("mcp.schema.maximum"),
    "exclusiveMaximum": N_("mcp.schema.exclusive_maximum"), "enum": N_("mcp.schema.enum"),
    "minLength": N_("mcp.schema.min_length"), "maxLength": N_("mcp.schema.max_length"),
    "minItems": N_("mcp.schema.min_items"), "maxItems": N_("mcp.schema.max_items"),
    "additionalProperties": N_("mcp.schema.additional_properties"),
}


def _message(error) -> Msg:
    kind, expected = error.validator, error.validator_value
    key = SCHEMA_WORDS.get(kind, N_("mcp.schema.invalid"))
    if kind == "enum":
        return Msg(key, expected=", ".join(map(str, expected)))
    if kind == "type":
        return Msg(key, expected=" | ".join(expected) if isinstance(expected, list) else str(expected))
    return Msg(key, expected=expected)


MAX_PASSED = 4096  # argument sets kept per tool (a set's key is at most MAX_PASSED_CHARS)
MAX_PASSED_CHARS = 512


def _passed_key(tool, arguments: dict):
    """The key under which a flat set of arguments that passed is remembered (every value a string, a whole number,
    a finite float, a boolean or null, at most MAX_PASSED_CHARS of repr): each value with its type, so True is never
    taken for 1. None for any other set, and for the tools whose `version` parse_version rewrites."""
    if len(arguments) > 8 or "version" in tool.input_schema["properties"]:
        return None
    items = []
    for name, value in arguments.items():
        if not (value is None or isinstance(value, (str, int, bool))
                or (isinstance(value, float) and math.isfinite(value))):
            return None
        items.append((name, type(value), value))
    key = tuple(sorted(items, key=lambda item: item[0]))
    return key if len(repr(key)) <= MAX_PASSED_CHARS else None


def _passed(tool) -> set:
    """The flat argument sets this tool judged valid lately. The checks read nothing but the arguments and the
    tool's schema, so a set seen passing passes again: it is not judged again (an agent reads the same trip many
    times). Refusals are never kept. Kept in the tool's own __dict__ (as its cached listings), so a tool made
    anew, with another schema, starts with none."""
    seen = tool.__dict__.get("_passed_arguments")
    if seen is None:
        seen = tool.__dict__["_passed_arguments"] = set()
    return seen


def check_arguments(tool, arguments) -> dict:
    """The arguments, checked. Raises Invalid naming the first offending argument."""
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise Invalid({"arguments": Msg("mcp.arguments_not_an_object")})
    key = _passed_key(tool, arguments)
    seen = _passed(tool)
    if key is not None and key in seen:
        return dict(arguments)
    args = _judge(tool, arguments)
    if key is not None:
        if len(seen) >= MAX_PASSED:
            seen.clear()
        seen.add(key)
    return args


def _judge(tool, arguments: dict) -> dict:
    properties = tool.input_schema["properties"]
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        names = ", ".join(quote(name) for name in unknown[:5])
        raise Invalid({"arguments": Plural("mcp.unknown_arguments", len(unknown), names=names,
                                           accepted=", ".join(properties))})
    args = dict(arguments)
    over = _over_bounds(tool.input_schema, args, [])  # counts first: nothing below walks more items than allowed
    if over is not None:
        raise Invalid({_name(over[0]) or "arguments": over[1]})
    bad = _non_finite(args)
    if bad is not None:
        raise Invalid({_name(bad): Msg(NOT_FINITE)})
    if "version" in properties:
        args["version"] = parse_version(args.get("version"))
    validator = tool.__dict__.get("_validator")  # made once per tool, kept with it (as _passed)
    if validator is None:
        validator = tool.__dict__["_validator"] = Draft202012Validator(tool.input_schema)
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
        if error.validator == "required":
            missing = next(n for n in error.validator_value if n not in (error.instance or {}))
            path = [*error.absolute_path, missing]
            raise Invalid({_name(path): Msg("field.is_required")})
        raise Invalid({_name(list(error.absolute_path)) or "arguments": _message(error)})
    return args


_JSON_TYPES = {"array": list, "string": str, "object": dict}


def _over_bounds(schema: dict, value, path: list) -> tuple[list, Msg] | None:
    """(path, message) of the first array or string longer than its schema's maxItems or maxLength, judged by
    its length alone, containers before their items (an array's items only once its count is allowed); None
    when every length is within bounds. A value of another type than its schema is left to the validator."""
    for branch in schema.get("anyOf", ()):
        if isinstance(value, _JSON_TYPES.get(branch.get("type"), ())):
            return _over_bounds(branch, value, path)
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            return path, Msg(SCHEMA_WORDS["maxItems"], expected=schema["maxItems"])
        items = schema.get("items")
        if isinstance(items, dict) and items.keys() & {"maxItems", "maxLength", "properties", "items", "anyOf"}:
            for i, item in enumerate(value):
                found = _over_bounds(items, item, [*path, i])
                if found:
                    return found
    elif isinstance(value, str):
        if len(value) > schema.get("maxLength", len(value)):
            return path, Msg(SCHEMA_WORDS["maxLength"], expected=schema["maxLength"])
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, item in value.items():
            rule = properties.get(key)
            found = _over_bounds(rule, item, [*path, key]) if isinstance(rule, dict) else None
            if found:
                return found
    return None


def _non_finite(args: dict) -> list | None:
    """The path to the first number that is not finite: NaN, ±Infinity (Python's json reads the literals,
    and 1e400 as inf) or an integer beyond the float range. JSON Schema's "number" admits them all, and
    they break whatever computes with them. Iterative, with the path as a linked trail (key, parent): a
    body as deep and wide as the parser allows costs one visit per value."""
    stack: list[tuple[object, tuple | None]] = [(args, None)]
    while stack:
        value, trail = stack.pop()
        if (isinstance(value, float) and not math.isfinite(value)) or (
                isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_MAX):
            path = []
            while trail is not None:
                key, trail = trail
                path.append(key)
            return path[::-1]
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((item, (key, trail)) for key, item in reversed(list(items))
                     if isinstance(item, (int, float, dict, list)))
    return None


def _name(path: list) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{bounded(part)}" if name else bounded(part))
    return name
