"""Schemathesis' engine against BTP under gunicorn, from BTP's own /api/openapi.json: every operation, seeded and
bounded, on real records; no 5xx, a documented status, content type and body, no traceback in the server's log. The
engine, not the pytest plugin: the plugin sets `Function._nodeid`, which pytest 9 does not have."""
from __future__ import annotations

import collections
import io

import pytest
import schemathesis
from schemathesis.engine import Status, events, from_schema

from oauth.kernel.models import AccessToken, Grant, OAuthClient
from oauth.kernel.tokens import hash_token, issue_token
from tests.factories import make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.live import gunicorn
from trips.services import sharing
from trips.core.db import atomic, db
from trips.services.trips import import_gpx

pytestmark = pytest.mark.slow

SEED = 20261201
MAX_EXAMPLES = 25
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance")
KOMOOT = "https://www.komoot.com/tour/123456"
GPX = gpx_from_points(make_points(300), name="Fuzz").decode()


@pytest.fixture(scope="module")
def live(app, app_config, tmp_path_factory):
    with gunicorn(app_config, tmp_path_factory.mktemp("fuzz") / "gunicorn.log", own_base_url=True) as server:
        yield server


def _trip(user, name: str):
    return import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name=name)), {})


def _ids(trip, stage: int = 0) -> dict:
    return {"path.trip_id": trip.id, "path.stage_id": trip.stages[stage].id}


def _only(name: str, parameters: dict) -> dict:
    return {"include-name": name, "parameters": parameters}  # one filter: several in one entry are OR-ed


def _grant(user) -> str:
    """An application the rider authorized (a grant backed by a live token of its own)."""
    client_id = "https://agent.example/client.json"
    with atomic():
        db.session.add(OAuthClient(client_id=client_id, kind="metadata", client_name="Agent", redirect_uris=[]))
        grant = Grant(user_id=user.id, client_id=client_id, scope="trips:read")
        db.session.add(grant)
        issue_token(user, "https://agent.example/mcp", "trips:read", client_id=client_id)
    return grant.id


def _config(user) -> schemathesis.Config:
    """Real ids in the paths (writes that take records away get records of their own), real values some of
    the time (a route link, a GPX file, `*` for If-Match, a point on the day's route), so that generated
    requests also get past the first refusal and reach the services."""
    main, settings, doomed, shared = (_trip(user, n) for n in ("Main", "Settings", "Doomed", "Shared"))
    share, _ = sharing.share_trip(user, shared.id)
    spare_token = make_token(user, "trips:read")
    spare_id = db.session.scalar(db.select(AccessToken.id).where(AccessToken.token_hash == hash_token(spare_token)))
    end = main.stages[1]
    day = "/api/trips/{trip_id}/stages/{stage_id}"
    return schemathesis.Config.from_dict({
        "seed": SEED,
        "headers": {"Authorization": f"Bearer {make_token(user)}"},
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "dictionaries": {"source": {"values": [KOMOOT]}, "gpx": {"values": [GPX]}, "any": {"values": ["*"]},
                         "lat": {"values": [end.end_lat]}, "lon": {"values": [end.end_lon]}},
        "parameters": {**_ids(main), "path.code": share.short_code, "path.grant_id": _grant(user),
                       "path.token_id": spare_id,
                       "header.If-Match": {"dictionary": "any", "probability": 0.8},
                       "body.sourceUrl": {"dictionary": "source", "probability": 0.5},
                       "body.gpxFile": {"dictionary": "gpx", "probability": 0.5}},
        "operations": [
            _only("DELETE /api/trips/{trip_id}", _ids(doomed)),
            _only("PATCH /api/trips/{trip_id}", _ids(settings)),
            _only("POST /api/trips/{trip_id}/analyze", _ids(settings)),
            _only(f"DELETE {day}", _ids(main, 2)),
            _only(f"POST {day}/accommodations/manual", {  # a lodging near the day's end (a far one is refused)
                **_ids(main, 0), "body.point": {"lat": main.stages[0].end_lat, "lon": main.stages[0].end_lon}}),
            _only(f"POST {day}/poi-waypoint", {**_ids(main, 1), "body.lat": {"dictionary": "lat", "probability": 0.5},
                                                "body.lon": {"dictionary": "lon", "probability": 0.5}}),
            {"include-path-regex": "/share$", "parameters": _ids(shared)},
        ],
    })


def test_api_answers_as_documented(ctx, live):
    schema = schemathesis.openapi.from_url(f"{live.url}/api/openapi.json", config=_config(make_user()))
    failures, errors, answered = [], [], collections.defaultdict(collections.Counter)
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            for interaction in event.recorder.interactions.values():
                if interaction.response is not None:
                    answered[event.recorder.label][interaction.response.status_code] += 1
            failures += [f"{event.recorder.label} [{check.name}] {check.failure_info.failure.title}: "
                         f"{check.failure_info.failure.message[:600]}\n{check.failure_info.code_sample[:800]}"
                         for checks in event.recorder.checks.values() for check in checks
                         if check.status == Status.FAILURE and check.failure_info]
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            errors.append(f"{getattr(event, 'label', '')}: {getattr(event, 'value', event)!r}"[:800])
    summary = "\n".join(f"{label}: {dict(sorted(codes.items()))}" for label, codes in sorted(answered.items()))
    assert not errors, errors
    assert not failures, "\n\n".join(dict.fromkeys(failures)) + "\n\n" + summary
    documented = {f"{m.upper()} {p}" for p, item in schema.raw_schema["paths"].items() for m in item if m != "parameters"}
    # Every operation was reached for real at least once (an answer below 400), not only refused. The engine
    # makes no case for the one operation without any input, the document itself: from_url read it above.
    unreached = sorted(op for op in documented - {"GET /api/openapi.json"}
                       if not any(code < 400 for code in answered.get(op, {})))
    assert unreached == [], summary
    log = live.log_tail(50000)
    assert "Traceback" not in log, log
