"""Loading a request's data with a marshmallow schema: every bad field named, nothing unstorable let through, a
number only where the document says number (`Number`, `Whole`; `FromText` for forms and query strings)."""
from __future__ import annotations

import numbers

from marshmallow import Schema, ValidationError, fields, pre_load

from trips.core import jsonio
from trips.core.text import bounded
from trips.errors import Invalid


def load(schema: Schema, data, *, partial: bool = False) -> dict:
    """Validate `data` with `schema`. Raises Invalid naming each bad field (names and values quoted safely)."""
    if not isinstance(data, dict):
        raise Invalid({"body": "must be a JSON object"})
    where = jsonio.find_unstorable(data)  # form fields (a GPX upload's title) do not come through the JSON loader
    if where is not None:
        raise Invalid({where: "holds a NUL character or a lone UTF-16 surrogate, which is not storable text"})
    try:
        return schema.load(data, partial=partial)
    except ValidationError as exc:
        raise Invalid(flatten(exc.messages)) from None


def flatten(messages, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    items = messages.items() if isinstance(messages, dict) else [("", messages)]
    for key, value in items:
        name = f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{bounded(key)}" if prefix else bounded(key))
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            out[name or "body"] = " ".join(value) if isinstance(value, list) else str(value)
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
