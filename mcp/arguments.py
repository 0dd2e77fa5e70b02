"""Tool arguments: unknown names refused by name, `version` judged in its own words, types checked against
the published input schema. Messages name the argument and never echo an unbounded value."""
from __future__ import annotations

import math
import sys

from jsonschema import Draft202012Validator

from trips.core.text import bounded, quote
from trips.errors import Invalid

VERSION_MISSING = ('This tool requires a "version" argument: the trip version you are editing, as returned by '
                   'get_trip. It is what makes a concurrent edit visible instead of silently overwritten.')
VERSION_STAR = ('The "version" argument does not accept "*": writing unconditionally would defeat the check. '
                'Read the trip with get_trip and pass the version it returned.')
VERSION_MALFORMED = 'Malformed "version" argument: expected the whole number returned by get_trip, such as 7.'
NOT_FINITE = "must be a finite number"
_FLOAT_MAX = sys.float_info.max
_validators: dict[str, Draft202012Validator] = {}


def parse_version(value) -> int:
    """Raises Invalid({"version": …}) when absent, `*` or not a whole number (numeric strings accepted)."""
    if value is None or value == "":
        raise Invalid({"version": VERSION_MISSING})
    if value == "*":
        raise Invalid({"version": VERSION_STAR})
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise Invalid({"version": VERSION_MALFORMED})


def _message(error) -> str:
    kind, expected = error.validator, error.validator_value
    if kind == "type":
        return f"must be of type {expected}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "at least", "exclusiveMinimum": "more than", "maximum": "at most",
                 "exclusiveMaximum": "less than"}[kind]
        return f"must be {words} {expected}"
    if kind == "enum":
        return "must be one of: " + ", ".join(map(str, expected))
    if kind in ("minLength", "maxLength", "minItems", "maxItems"):
        return f"has a {kind.replace('min', 'minimum ').replace('max', 'maximum ').lower()} of {expected}"
    if kind == "additionalProperties":
        return "has a property it does not accept"
    return "is not valid"


def check_arguments(tool, arguments) -> dict:
    """The arguments, checked. Raises Invalid naming the first offending argument."""
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise Invalid({"arguments": "must be an object"})
    properties = tool.input_schema["properties"]
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        names = ", ".join(quote(name) for name in unknown[:5])
        raise Invalid({"arguments": f"Unknown argument(s): {names}. This tool accepts: {', '.join(properties)}."})
    args = dict(arguments)
    bad = _non_finite(args)
    if bad is not None:
        raise Invalid({_name(bad): NOT_FINITE})
    if "version" in properties:
        args["version"] = parse_version(args.get("version"))
    validator = _validators.get(tool.name)
    if validator is None:
        validator = _validators[tool.name] = Draft202012Validator(tool.input_schema)
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
        if error.validator == "required":
            missing = next(n for n in error.validator_value if n not in (error.instance or {}))
            path = [*error.absolute_path, missing]
            raise Invalid({_name(path): "is required"})
        raise Invalid({_name(list(error.absolute_path)) or "arguments": _message(error)})
    return args


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
