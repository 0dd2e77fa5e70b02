"""mcp/arguments.py `plain_checked`: a hot path's arguments judged by hand never pass what `check_arguments` refuses,
and answer what it answers (the rename's fast path, mcp/tools/edit_stages.py `rename`, relies on both)."""
import itertools
from types import SimpleNamespace

import pytest

from mcp import arguments as a
from mcp.tools import BY_NAME
from trips.errors import Invalid

EDIT = BY_NAME["edit_stages"]
TRIP, STAGE = "01a23919-4b43-7727-b116-27e3bbb2701e", "01a23919-4b43-7727-b116-27e3bbb2701f"
RENAME = {"tripId": TRIP, "action": "update", "version": 7, "stageId": STAGE, "label": "Col de Rousset"}
# values each rename argument is tried with: plain ones, and every shape the schema or parse_version refuses
VALUES = {
    "tripId": [TRIP, "", 5, None, [TRIP], True],
    "version": [1, 7, 2**31 - 1, 2**31, 0, -1, True, False, 7.0, "7", "*", "", None, float("nan"), 10**400],
    "label": ["", "x" * 255, "x" * 256, "é" * 255, "é" * 256, None, 3, ["x"], {"x": 1}],
    "stageId": [STAGE, 1, None],
}


def judged(tool, arguments):
    try:
        return a.check_arguments(tool, arguments)
    except Invalid:
        return "refused"


@pytest.mark.parametrize("name", VALUES)
def test_plain_never_passes_what_check_arguments_refuses_and_answers_as_it(name):
    for value in VALUES[name]:
        arguments = {**RENAME, name: value}
        plain, whole = a.plain_checked(EDIT, arguments), judged(EDIT, arguments)
        if plain is not None:
            assert whole != "refused", (name, value)
            assert plain == whole and [type(v) for v in plain.values()] == [type(v) for v in whole.values()]


def test_plain_takes_the_renames_an_agent_sends():
    for version, label in itertools.product((1, 7, 2**31 - 1), ("", "Col de Rousset", "x" * 255, "é" * 255)):
        arguments = {**RENAME, "version": version, "label": label}
        assert a.plain_checked(EDIT, arguments) == arguments == judged(EDIT, arguments)
    assert a.plain_checked(EDIT, RENAME) is not RENAME  # a copy, as check_arguments returns


@pytest.mark.parametrize("arguments", [
    {**RENAME, "label": "x" * 256},  # over maxLength: jsonschema's words
    {**RENAME, "version": 0},  # under minimum
    {**RENAME, "version": True},  # a boolean is no version
    {**RENAME, "version": "7"},  # parse_version rewrites it: left to check_arguments
    {**RENAME, "tripId": 5},
    {**RENAME, "colour": "red"},  # a name the schema does not list
    {k: v for k, v in RENAME.items() if k != "version"},  # a required one missing
    {**RENAME, "distance": 3.5},  # a number: not judged by hand
    {**RENAME, "startPoint": {"lat": 1, "lon": 2}},  # an object: not judged by hand
    "not an object",
])
def test_anything_not_plain_is_left_to_check_arguments(arguments):
    assert a.plain_checked(EDIT, arguments) is None


def tool(schema: dict):
    return SimpleNamespace(input_schema=schema)


@pytest.mark.parametrize("rule", [
    {"type": "string", "pattern": "^[a-z]+$"},  # a keyword it does not judge
    {"type": "string", "minLength": 3},
    {"type": "string", "enum": ["a"]},
    {"type": "integer", "maximum": 3},
    {"type": ["string", "null"]},
])
def test_a_property_whose_schema_says_more_is_never_judged_by_hand(rule):
    t = tool({"type": "object", "properties": {"name": rule}})
    assert a.plain_checked(t, {"name": "ab"}) is None
    assert a.plain_checked(t, {"name": 5}) is None
    assert a.plain_checked(t, {}) == {}  # the other arguments (none here) still are


def test_a_tool_schema_with_more_rules_is_never_judged_by_hand():
    t = tool({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False})
    assert a.plain_checked(t, {"name": "ab"}) is None


def test_a_version_without_its_minimum_is_left_to_parse_version():
    t = tool({"type": "object", "properties": {"version": {"type": "integer"}}})
    assert a.plain_checked(t, {"version": 3}) is None  # parse_version refuses -1 in its own words
    assert judged(t, {"version": -1}) == "refused"
