"""Strategies: values a JSON Schema admits (`valid`), the values at and beyond its edges (`edges`), hostile
JSON of any shape (`json_values`), and JSON text as a hostile client writes it (`dumps`).

A small generator of our own rather than hypothesis-jsonschema: the schemas BTP publishes use a handful of
keywords (type, enum, minimum/maximum and their exclusive forms, min/maxLength, min/maxItems, items,
properties, required, additionalProperties, format date, local $ref), and the fuzzing needs the edges of
each keyword as much as the values inside it.
"""
from __future__ import annotations

import functools
import json
import math
import sys
from datetime import date

from hypothesis import strategies as st

from tests.fuzz.support import LONG

LONE = "\ud800"  # a lone surrogate as a Python str; `dumps` writes it as the six-character escape \ud800
FLOAT_MAX = sys.float_info.max
NON_FINITE = [math.nan, math.inf, -math.inf, 10 ** 400, -(10 ** 400), 2 ** 1024, 1e308, -1e308]
HOSTILE_TEXT = ["", " ", "\t\n", LONE, "a" + LONE + "b", "\udfff", "\udc00\ud83d", "a\x00b", "\x00", "\u202eevil",
                "\ufeff", "\U0001F6B2", "e\u0301", "<script>alert(1)</script>", "'; DROP TABLE trip; --", "%00",
                "../../etc/passwd", "{{7*7}}", "null", "true", "0", "-1", "1e400", "NaN", LONG, "x" * 256,
                "\u0085\u2028\u2029", "\x7f\x1b[31m"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.sampled_from(NON_FINITE),
                    st.sampled_from(HOSTILE_TEXT), st.text(max_size=20))


@functools.lru_cache(maxsize=None)
def json_values(max_leaves: int = 12):
    """Any JSON value, hostile scalars included, nested a few levels."""
    return st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(HOSTILE_TEXT)),
                                                     inner, max_size=4)), max_leaves=max_leaves)


def dumps(value) -> bytes:
    """JSON text as a hostile client writes it: NaN and Infinity literals, lone surrogates as \\uXXXX escapes,
    integers of any length."""
    return json.dumps(value, allow_nan=True).encode()


# ------------------------------------------------------------------ JSON Schema → values


def resolve(schema: dict, root: dict | None) -> dict:
    while isinstance(schema, dict) and "$ref" in schema and root is not None:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _types(schema: dict) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return ["object"] if "properties" in schema else ["string"]
    return kind if isinstance(kind, list) else [kind]


def _text(schema: dict):
    if schema.get("format") == "date":
        return st.dates(date(2000, 1, 1), date(2100, 12, 31)).map(date.isoformat)
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    top = min(high, low + 30) if high is not None else low + 30
    printable = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
    sizes = [st.text(printable, min_size=low, max_size=top)]
    if high is not None:
        sizes.append(st.just("é" * high))  # the longest admitted, multi-byte
    return st.one_of(sizes)


def _number(schema: dict, integer: bool):
    low, high = schema.get("minimum"), schema.get("maximum")
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if integer:
        low = low if xlow is None else math.floor(xlow) + 1
        high = high if xhigh is None else math.ceil(xhigh) - 1
        return st.integers(low, high if high is not None else (low or 0) + 10 ** 6)
    low = low if xlow is None else xlow
    high = high if xhigh is None else xhigh
    return st.floats(low, high, allow_nan=False, allow_infinity=False, exclude_min=xlow is not None,
                     exclude_max=xhigh is not None)


def valid(schema: dict, root: dict | None = None, overrides: dict | None = None):
    """Values `schema` admits. `overrides` maps a property name to the strategy to use for it (ids)."""
    schema = resolve(schema, root)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([valid(s, root, overrides) for s in schema[key]])
    options = []
    for kind in _types(schema):
        if kind == "null":
            options.append(st.none())
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind in ("integer", "number"):
            options.append(_number(schema, kind == "integer"))
        elif kind == "string":
            options.append(_text(schema))
        elif kind == "array":
            items = valid(schema.get("items", {"type": "string"}), root, overrides)
            low = schema.get("minItems", 0)
            high = min(schema.get("maxItems", low + 4), low + 4)
            options.append(st.lists(items, min_size=low, max_size=high, unique=bool(schema.get("uniqueItems"))))
        elif kind == "object":
            options.append(valid_object(schema, root, overrides))
    return st.one_of(options)


def valid_object(schema: dict, root: dict | None = None, overrides: dict | None = None):
    overrides = overrides or {}
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))

    def strategy(name):
        return overrides[name] if name in overrides else valid(properties[name], root, overrides)

    return st.fixed_dictionaries({n: strategy(n) for n in properties if n in required},
                                 optional={n: strategy(n) for n in properties if n not in required})


WRONG_TYPES = {"string": [0, 1.5, True, None, [], {}, ["x"]],
               "integer": ["1", 1.5, True, None, [], {}, "one"],
               "number": ["1.5", True, False, None, [], {"value": 1}],
               "boolean": ["true", 0, 1, None, [], "yes"],
               "array": ["hotel", {}, 0, None, True],
               "object": [[], "point", 0, None, [1, 2]]}


def edges(schema: dict, root: dict | None = None) -> list:
    """Values at and just past every bound of `schema`, and values of every wrong type."""
    schema = resolve(schema, root)
    out: list = list(NON_FINITE)
    for kind in _types(schema):
        out += WRONG_TYPES.get(kind, [])
        if kind in ("integer", "number"):
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                bound = schema.get(key)
                if bound is None:
                    continue
                out += [bound, bound - 1, bound + 1, math.nextafter(bound, -math.inf),
                        math.nextafter(bound, math.inf), -bound, bound * 1000]
            out += [0, -0.0, -1, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 10 ** 18, 5e-324]
        elif kind == "string":
            out += HOSTILE_TEXT
            for key in ("minLength", "maxLength"):
                bound = schema.get(key)
                if bound is not None:
                    out += ["x" * max(bound - 1, 0), "x" * bound, "é" * (bound + 1), "x" * (bound + 1)]
            if schema.get("format") == "date":
                out += ["2026-02-30", "2026-13-01", "0000-01-01", "9999-12-31", "1900-01-01", "2026-1-1",
                        "2026-01-01T00:00:00Z", "01/02/2026", "２０２６-０１-０１", date.today().isoformat(),
                        "2100-01-01", "+2026-01-01"]
            if "enum" in schema:
                out += [e.upper() for e in schema["enum"] if isinstance(e, str)] + [" " + str(schema["enum"][0])]
        elif kind == "array":
            item = schema.get("items", {})
            sample = resolve(item, root).get("enum", ["x"])
            high = schema.get("maxItems", 5)
            out += [[], [None], [sample[0]] * (high + 1), list(sample) * 2, [[sample[0]]], [LONE], [LONG],
                    [sample[0], 0], list(range(10_000))]
        elif kind == "object":
            properties = schema.get("properties", {})
            out += [{}, {"extra": 1}, {LONE: 1}, {n: None for n in properties}]
            if {"lat", "lon"} <= set(properties):  # a point: the poles, the antimeridian, just beyond
                out += [{"lat": lat, "lon": lon} for lat, lon in
                        [(90, 180), (-90, -180), (90.0000001, 0), (0, 180.0000001), (-91, 0), (0, -181),
                         (1e308, 0), (0, 0), (math.nan, 0), (0, math.inf)]]
                out += [{"lat": 45, "lon": 5, "ele": e} for e in (-501, 9001, -500, 9000, math.nan)]
                out += [{"lat": 45, "lon": 5, "extra": 1}, {"lat": "45", "lon": "5"}, {"lat": 45}]
    if "enum" in schema:
        out += list(schema["enum"])  # in range: with a sibling edge elsewhere
    return out


def with_edges(schema: dict, root: dict | None = None, overrides: dict | None = None):
    """Mostly admitted values, sometimes an edge or a wrong type."""
    return st.one_of(valid(schema, root, overrides), st.sampled_from(edges(schema, root)), SCALARS)


def hostile_object(schema: dict, root: dict | None = None, overrides: dict | None = None):
    """An object for `schema`: admitted values (ids from `overrides`), then one mutation: none, one property
    given an edge value, a required property dropped, an unknown property added, or not an object at all."""
    properties = schema.get("properties", {})
    names = sorted(properties)
    required = sorted(schema.get("required", ()))

    def mutate(base: dict, choice: tuple):
        how, name, value = choice
        out = dict(base)
        if how == "edge" and name:
            out[name] = value
        elif how == "drop" and name in out:
            del out[name]
        elif how == "unknown":
            out[name] = value
        elif how == "replace":
            return value
        return out

    choices = []
    if names:
        choices.append(st.sampled_from(names).flatmap(
            lambda n: st.tuples(st.just("edge"), st.just(n), st.sampled_from(edges(properties[n], root)))))
        choices.append(st.sampled_from(names).flatmap(
            lambda n: st.tuples(st.just("edge"), st.just(n), with_edges(properties[n], root))))
    if required:
        choices.append(st.tuples(st.just("drop"), st.sampled_from(required), st.none()))
    choices.append(st.tuples(st.just("unknown"), st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=10)).filter(
        lambda n: n not in properties), SCALARS))
    choices.append(st.tuples(st.just("replace"), st.none(), st.one_of(json_values(6), st.sampled_from(
        [None, [], "", 0, [{}], LONG])) ))
    untouched = st.tuples(st.just("none"), st.none(), st.none())
    return st.builds(mutate, valid_object(schema, root, overrides), st.one_of(untouched, st.one_of(choices)))
