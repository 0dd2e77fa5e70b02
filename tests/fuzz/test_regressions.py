"""What the fuzzing found, as plain tests run on every pass: a confirmation's inputResponses that is not an object
(mcp/confirmation.py) is refused by name or read as declined, never a -32603; a list or an object in grant_types
(oauth/services/registration.py) is 400 invalid_client_metadata, never a 500."""
from __future__ import annotations

import json

import pytest

from tests.fuzz import rpc
from tests.fuzz.strategies import dumps
from trips.core.db import db
from trips.models import Trip


def _elicit(client, world, arguments: dict, params: dict | None = None):
    body = rpc.call_body("update_trip_settings", arguments)
    body["params"]["_meta"] = {**rpc.META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    body["params"].update(params or {})
    response = client.post("/mcp", data=dumps(body), headers=rpc.headers(world.token, "tools/call",
                                                                          "update_trip_settings"))
    assert response.status_code == 200
    return response.get_json()


@pytest.mark.parametrize("answer,refused", [
    (["x"], True), ("yes", True), (5, True),
    ({"confirm": "yes"}, False), ({"confirm": {"action": "accept", "content": "x"}}, False),
    ({"confirm": {"action": "accept", "content": ["confirm"]}}, False), ({"confirm": None}, False),
])
def test_a_malformed_answer_to_an_elicitation_is_refused_or_declined_and_writes_nothing(client, world, ledger,
                                                                                        answer, refused):
    # a change that recuts the days: the one update_trip_settings asks about (a title is saved at once)
    pace = 0.8 if world.trip.fatigue_factor != 0.8 else 0.9
    arguments = {"id": world.trip.id, "version": world.trip.version, "fatigueFactor": pace}
    state = _elicit(client, world, arguments)["result"]["requestState"]
    before = ledger.look()
    result = _elicit(client, world, arguments, {"requestState": state, "inputResponses": answer})["result"]
    ledger.assert_unchanged(before, "a malformed answer")
    text = json.loads(result["content"][0]["text"])
    if refused:
        assert result["isError"] is True and "inputResponses" in text["error"]["fields"]
        # the state was not used up: the well-formed answer still goes through
        accepted = _elicit(client, world, arguments, {"requestState": state, "inputResponses": {
            "confirm": {"action": "accept", "content": {"confirm": True}}}})["result"]
        assert accepted["isError"] is False
        db.session.rollback()
        assert db.session.get(Trip, world.trip.id).fatigue_factor == pace
    else:
        assert result["isError"] is False and text["result"].startswith("Nothing was done")


@pytest.mark.parametrize("grant", [["authorization_code"], {}, 1, None])
def test_a_registration_with_a_grant_that_is_not_a_string_is_refused(client, ledger, grant):
    before = ledger.look()
    response = client.post("/oauth/register", json={"redirect_uris": ["https://agent.example/cb"],
                                                    "grant_types": ["authorization_code", grant]})
    assert response.status_code == 400
    assert response.get_json()["error"] == "invalid_client_metadata"
    ledger.assert_unchanged(before, "a refused registration")
