"""The fuzz properties can fail: the ledger sees a commit, the fingerprint sees a changed row, the watchdog
stops a hung case, and the judge refuses a 500, a -32603, a write behind a refusal and an echoed value.
(Fast: not marked slow.)"""
from __future__ import annotations

import json
import time

import pytest
from flask import Response

from tests.factories import make_user
from tests.fuzz import rpc
from tests.fuzz.support import LONG, CaseHung, assert_unchanged, bounded_case, fingerprint


def _answer(payload, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def _refusal(message: str) -> dict:
    text = json.dumps({"error": {"code": "invalid_argument", "message": message}})
    return {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}], "isError": True}}


def test_the_ledger_sees_a_commit_and_nothing_else(ledger):
    before = ledger.look()
    ledger.assert_unchanged(before, "nothing")
    make_user("ledger@example.org")
    with pytest.raises(AssertionError, match="committed a write"):
        ledger.assert_unchanged(before, "a user made")


def test_the_fingerprint_sees_a_changed_row(world):
    from trips.core.db import atomic, db
    from trips.models import Trip

    before = fingerprint()
    with atomic():
        db.session.get(Trip, world.trip.id).title = "Changed"
    with pytest.raises(AssertionError, match="rows changed"):
        assert_unchanged(before, fingerprint(), "a rename")


def test_the_watchdog_stops_a_hung_case():
    with pytest.raises(CaseHung):
        with bounded_case("check", limit=0.2, count=False):
            time.sleep(5)


def test_the_judge_refuses_what_the_properties_forbid(ledger):
    before = ledger.look()
    with pytest.raises(AssertionError, match="HTTP 500"):
        rpc.judge(_answer({}, 500), ledger, before, "a 500")
    with pytest.raises(AssertionError, match="-32603"):
        rpc.judge(_answer({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}}), ledger, before,
                  "an internal error")
    with pytest.raises(AssertionError, match="echoes an unbounded value"):
        rpc.judge(_answer(_refusal(f"title: {LONG} is too long")), ledger, before, "an echo")
    with pytest.raises(AssertionError, match="character message"):
        rpc.judge(_answer(_refusal("x" * (rpc.MESSAGE_MAX + 1))), ledger, before, "a long message")
    make_user("judge@example.org")
    with pytest.raises(AssertionError, match="committed a write"):
        rpc.judge(_answer(_refusal("refused")), ledger, before, "a refusal that wrote")
    assert rpc.judge(_answer({"jsonrpc": "2.0", "id": LONG, "result": {"content": [], "isError": False}}), ledger,
                     ledger.look(), "a success") == "accepted"  # the id is the caller's own, echoed as sent
