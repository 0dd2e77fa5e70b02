"""Loading a request's data with a marshmallow schema: every bad field named, nothing unstorable let through, a
number only where the document says number (`Number`, `Whole`; `FromText` for forms and query strings), each field
message a Msg (a key and values) rendered in the reader's language at the edge, marshmallow's own included."""
from __future__ import annotations

import numbers
import re

from marshmallow import Schema, ValidationError, fields, pre_load, validate

from trips.core import jsonio
from trips.core.i18n import N_
from trips.core.text import bounded
from trips.errors import Invalid, Msg

# marshmallow's own messages (its fields' default_error_messages, its validators' and schemas' templates, as
# marshmallow writes them in English), each with its key; tests/trips/core/test_catalogues.py holds the table to
# marshmallow's messages. Their values (a bound, the choices) keep their names.
_OP = "(?P<{}>(?:greater|less) than(?: or equal to)?)"
MARSHMALLOW = tuple((re.compile(pattern + r"\Z"), key) for pattern, key in (
    (r"Missing data for required field\.", N_("field.required")),
    (r"Field may not be null\.", N_("field.null")),
    (r"Invalid value\.", N_("field.invalid")),
    (r"Invalid type\.", N_("field.not_an_object")),
    (r"Invalid input type\.", N_("field.not_an_object")),
    (r"Unknown field\.", N_("field.unknown")),
    (r"Not a valid list\.", N_("field.not_a_list")),
    (r"Not a valid tuple\.", N_("field.not_a_list")),
    (r"Not a valid mapping type\.", N_("field.not_an_object")),
    (r"Not a valid string\.", N_("field.not_a_string")),
    (r"Not a valid utf-8 string\.", N_("field.not_a_string")),
    (r"Not a valid number\.", N_("field.not_a_number")),
    (r"Number too large\.", N_("field.number_too_large")),
    (r"Special numeric values \(nan or infinity\) are not permitted\.", N_("field.not_finite")),
    (r"Not a valid integer\.", N_("field.not_an_integer")),
    (r"Not a valid boolean\.", N_("field.not_a_boolean")),
    (r"Not a valid (?:naive |aware )?date\.", N_("field.not_a_date")),
    (r"Not a valid (?:naive |aware )?datetime\.", N_("field.not_a_datetime")),
    (r"Not a valid URL\.", N_("field.not_a_url")),
    (r"Not a valid email address\.", N_("field.not_an_email")),
    (r"String does not match expected pattern\.", N_("field.invalid")),
    (r"Invalid input\.", N_("field.invalid")),
    (r"Must be one of: (?P<choices>.*)\.", N_("field.one_of")),
    (r"Shorter than minimum length (?P<min>\d+)\.", N_("field.length_min")),
    (r"Longer than maximum length (?P<max>\d+)\.", N_("field.length_max")),
    (r"Length must be between (?P<min>\d+) and (?P<max>\d+)\.", N_("field.length_between")),
    (r"Length must be (?P<equal>\d+)\.", N_("field.length_equal")),
    ("Must be " + _OP.format("min_op") + r" (?P<min>\S+) and " + _OP.format("max_op") + r" (?P<max>\S+)\.",
     N_("field.range")),
    ("Must be " + _OP.format("op") + r" (?P<bound>\S+)\.", N_("field.range_one")),
))
# The comparisons of marshmallow's Range messages, in words of the catalogue.
OPERATORS = {"greater than or equal to": N_("field.op.gte"), "greater than": N_("field.op.gt"),
             "less than or equal to": N_("field.op.lte"), "less than": N_("field.op.lt")}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?\Z")


def load(schema: Schema, data, *, partial: bool = False) -> dict:
    """Validate `data` with `schema`. Raises Invalid naming each bad field (names and values quoted safely)."""
    if not isinstance(data, dict):
        raise Invalid({"body": Msg("field.body_not_an_object")})
    over = over_bounds(schema, data)  # before anything walks the items: their count bounds that walk
    if over is not None:
        raise Invalid(over)
    where = jsonio.find_unstorable(data)  # form fields (a GPX upload's title) do not come through the JSON loader
    if where is not None:
        raise Invalid({where: Msg("field.unstorable")})
    try:
        return schema.load(data, partial=partial)
    except ValidationError as exc:
        raise Invalid(flatten(exc.messages)) from None


def over_bounds(schema: Schema, data: dict, prefix: str = "") -> dict[str, Msg] | None:
    """{field: message} for the first list or string of `data` longer than its field's Length allows, judged by
    its count alone (the field's own Length validator, as the load would say it), nested objects and list items
    after their container's count; None when every count is within bounds. Items are never read, nor echoed."""
    for name, field in schema.fields.items():
        key = field.data_key or name
        value = data.get(key)
        if not isinstance(value, (list, str, dict)):
            continue
        where = f"{prefix}.{bounded(key)}" if prefix else bounded(key)
        if isinstance(value, (list, str)):
            for rule in field.validators:
                if isinstance(rule, validate.Length):
                    try:
                        rule(value)
                    except ValidationError as exc:
                        return {where: keyed(exc.messages[0])}
        inner = field.inner if isinstance(field, fields.List) else None
        if isinstance(inner, fields.Nested) and isinstance(value, list):
            for i, item in enumerate(value):
                found = over_bounds(inner.schema, item, f"{where}[{i}]") if isinstance(item, dict) else None
                if found:
                    return found
        elif isinstance(field, fields.Nested) and isinstance(value, dict) and not field.many:
            found = over_bounds(field.schema, value, where)
            if found:
                return found
    return None


def flatten(messages, prefix: str = "") -> dict[str, Msg]:
    """{field path: Msg} of marshmallow's nested error messages; several messages of one field said one after the
    other."""
    out: dict[str, Msg] = {}
    items = messages.items() if isinstance(messages, dict) else [("", messages)]
    for key, value in items:
        name = f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{bounded(key)}" if prefix else bounded(key))
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            said = [keyed(item) for item in (value if isinstance(value, list) else [value])]
            out[name or "body"] = _one_after_another(said) if said else Msg("field.invalid")
    return out


class Number(fields.Float):
    """A number (a JSON number; a Python caller's numpy scalar too), never a string that reads as one: marshmallow's
    Float would take "45.5", which the OpenAPI document and the tools' schemas call a number. Booleans are refused as
    Float refuses them."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return super()._deserialize(value, attr, data, **kwargs)


class Whole(fields.Integer):
    """A JSON integer, never a string of digits nor a float (marshmallow's Integer, strict)."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)


class FromText(Schema):
    """A schema whose values come as text (a form, a query string): a `Number` or `Whole` field reads its value from
    the digits (" 8 " is 8, "1.5" is 1.5); text that is no number is left for the field to refuse by name."""

    @pre_load
    def _numbers_from_text(self, data, **_):
        if not isinstance(data, dict):
            return data
        kinds = {field.data_key or name: float if isinstance(field, Number) else int
                 for name, field in self.fields.items() if isinstance(field, (Number, fields.Integer))}
        return {key: _read(kinds[key], value) if key in kinds and isinstance(value, str) else value
                for key, value in data.items()}


def _read(kind, text: str):
    try:
        return kind(text)
    except (ValueError, OverflowError):
        return text
def _one_after_another(said: list[Msg]) -> Msg:
    return said[0] if len(said) == 1 else Msg("field.and", first=said[0], then=_one_after_another(said[1:]))


def keyed(message) -> Msg:
    """A field message as a Msg: ours already are; marshmallow's own English ones are matched to their key (MARSHMALLOW),
    with their values (numbers as numbers); any other text is kept as it is, as a bare key."""
    if isinstance(message, Msg):
        return message
    text = str(message)
    for pattern, key in MARSHMALLOW:
        found = pattern.match(text)
        if found:
            return Msg(key, **{name: _value(name, value) for name, value in found.groupdict().items()})
    return Msg(text)


def _value(name: str, value: str):
    if name == "op" or name.endswith("_op"):
        return Msg(OPERATORS[value])
    if _NUMBER.match(value):
        return float(value) if "." in value else int(value)
    return value
