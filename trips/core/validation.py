"""Loading a request's data with a marshmallow schema: every bad field named, nothing unstorable let through."""
from __future__ import annotations

from marshmallow import Schema, ValidationError

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
