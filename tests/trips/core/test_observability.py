"""JSON logs, request ids (into the jobs a request enqueues), /metrics content and who may scrape it."""
import io
import json
import logging
import re

import pytest
from rq import SimpleWorker

from app import ConfigError, load_config
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis
from jobs.tasks import bind_app
from tests.factories import idem
from tests.mcp_helpers import call, mcp_token
from trips.core.observability import JsonFormatter, ObservedJob

TOKEN = "m" * 40


@pytest.fixture
def json_lines():
    """Every log record of the test, formatted by the product's JSON formatter, as parsed dicts."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous = root.level
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(previous)


def access(lines):
    return [line for line in lines if line["logger"] == "btp.access"]


def test_one_access_line_per_request_with_its_fields(client, rider, json_lines):
    user, headers = rider
    answer = client.get("/api/trips", headers=headers)
    [line] = access(json_lines())
    assert line["method"] == "GET" and line["route"] == "/api/trips" and line["status"] == 200
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert line["user_id"] == str(user.id) and line["level"] == "INFO"
    assert re.fullmatch(r"[0-9a-f]{32}", line["request_id"]) and answer.headers["X-Request-Id"] == line["request_id"]


def test_the_route_rule_is_logged_never_the_path_or_query(client, rider, json_lines):
    _, headers = rider
    client.get("/s/SECRETSHARECODE")
    client.get("/api/geocode/search?q=Private+Street+12", headers=headers)
    client.get("/no/such/page")
    lines = access(json_lines())
    assert [line["route"] for line in lines] == ["/s/<code>", "/api/geocode/search", "<unmatched>"]
    assert lines[0]["user_id"] is None and lines[2]["status"] == 404
    text = json.dumps(lines)
    assert "SECRETSHARECODE" not in text and "Private" not in text


def test_an_mcp_call_names_its_user(app, client, rider, json_lines):
    user, _ = rider
    call(client, mcp_token(app, user), "list_trips")
    [line] = access(json_lines())
    assert line["route"] == "/mcp" and line["user_id"] == str(user.id)


@pytest.mark.parametrize("sent,kept", [
    ("abc-DEF-123", True),
    ("a" * 64, True),
    ("a" * 65, False),
    ("abc def", False),
    ("abc_def", False),
    ("", False),
])
def test_an_incoming_request_id_is_kept_only_when_sane(client, json_lines, sent, kept):
    answer = client.get("/healthz", headers={"X-Request-Id": sent})
    echoed = answer.headers["X-Request-Id"]
    assert (echoed == sent) is kept
    if not kept:
        assert re.fullmatch(r"[0-9a-f]{32}", echoed)
    assert access(json_lines())[0]["request_id"] == echoed


def test_the_formatter_writes_one_json_object_with_fields_and_traceback():
    record = logging.LogRecord("btp.x", logging.ERROR, __file__, 1, "failed %s", ("here",), None)
    record.fields = {"trip_id": "t1", "message": "not overwritten"}
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed here" and line["trip_id"] == "t1" and line["level"] == "ERROR"
    assert "ValueError: boom" in line["exc"] and "request_id" not in line


def test_the_request_id_follows_the_request_into_its_jobs(app, client, rider, fake_thirdparty, json_lines):
    from tests.trips.services.test_pipeline import LONG

    _, headers = rider
    fake_thirdparty.add_komoot_tour("778", "Traced", LONG)
    answer = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/778"},
                         headers={**headers, **idem(), "X-Request-Id": "trace-me-1"})
    assert answer.status_code == 202 and answer.headers["X-Request-Id"] == "trace-me-1"
    with app.app_context():
        [job] = get_queue().get_jobs()
        assert job.meta["request_id"] == "trace-me-1"
    bind_app(app)
    with app.app_context():
        SimpleWorker([get_queue()], connection=get_redis(), job_class=ObservedJob).work(burst=True)
    jobs = [line for line in json_lines() if line["logger"] == "btp.jobs"]
    finished = [line for line in jobs if "outcome" in line]
    # fetch_route, then the generate_stages it enqueued, then the analysis that one dispatched:
    # all under the request's id.
    assert [line["job"] for line in finished[:2]] == ["fetch_route", "generate_stages"]
    assert {line["job"] for line in finished[2:]} == {"run_enrichment"}
    assert all(line["request_id"] == "trace-me-1" for line in jobs) and len(jobs) == 2 * len(finished)
    assert all(line["outcome"] == "ok" and line["duration_ms"] >= 0 for line in finished)
    client.get("/healthz")
    assert access(json_lines())[-1]["request_id"] != "trace-me-1"  # nothing leaks into the next request


def test_metrics_count_requests_tool_calls_and_jobs(app, client, rider, fake_thirdparty):
    from tests.trips.services.test_pipeline import LONG

    token = mcp_token(app, rider[0])
    for _ in range(2):
        client.get("/healthz")
    call(client, token, "list_trips")
    call(client, token, "get_trip", {"id": "0192f000-0000-7000-8000-000000000000"})
    fake_thirdparty.add_komoot_tour("779", "Counted", LONG)
    call(client, token, "create_trip", {"sourceUrl": "https://www.komoot.com/tour/779"})
    bind_app(app)
    with app.app_context():
        SimpleWorker([get_queue()], connection=get_redis(), job_class=ObservedJob).work(burst=True)
    text = client.get("/metrics").get_data(as_text=True)
    assert 'btp_http_requests_total{method="GET",route="/healthz",status="200"} 2' in text
    assert 'btp_http_requests_total{method="POST",route="/mcp",status="200"} 3' in text
    assert 'btp_http_request_duration_seconds_bucket{method="GET",route="/healthz",le="+Inf"} 2' in text
    assert 'btp_http_request_duration_seconds_count{method="GET",route="/healthz"} 2' in text
    assert 'btp_tool_calls_total{tool="list_trips",outcome="ok"} 1' in text
    assert 'btp_tool_calls_total{tool="get_trip",outcome="not_found"} 1' in text
    assert 'btp_tool_calls_total{tool="create_trip",outcome="ok"} 1' in text
    assert 'btp_job_duration_seconds_count{kind="fetch_route",outcome="ok"} 1' in text
    assert 'btp_job_duration_seconds_count{kind="generate_stages",outcome="ok"} 1' in text
    assert 'btp_jobs{state="queued"} 0' in text
    _parses_as_prometheus_text(text)


def _parses_as_prometheus_text(text):
    """Every sample line is `name{labels} value`, histogram buckets are cumulative and end at +Inf = count."""
    sample = re.compile(r'([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\\n]|\\.)*",?)*\})? (-?[0-9.e+]+|\+Inf|NaN)')
    buckets = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.fullmatch(r"# (HELP|TYPE) [a-z_]+ .+", line), line
            continue
        match = sample.fullmatch(line)
        assert match, line
        if match[1].endswith("_bucket"):
            series = re.sub(r',le="[^"]*"', "", match[2])
            buckets.setdefault((match[1], series), []).append(float(match[3]))
    assert buckets
    for counts in buckets.values():
        assert counts == sorted(counts) and len(counts) == 12


def test_an_unknown_tool_and_an_unexpected_failure_are_counted_with_bounded_labels(app, client, rider,
                                                                                   monkeypatch):
    import dataclasses

    from mcp.tools import BY_NAME
    from tests.mcp_helpers import modern

    token = mcp_token(app, rider[0])
    modern(client, token, "tools/call", {"name": "x" * 200, "arguments": {}})

    def explode(ctx, args):
        raise RuntimeError("boom")

    monkeypatch.setitem(BY_NAME, "list_trips", dataclasses.replace(BY_NAME["list_trips"], run=explode))
    modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}})
    text = client.get("/metrics").get_data(as_text=True)
    assert 'btp_tool_calls_total{tool="unknown",outcome="rpc_error"} 1' in text and "x" * 200 not in text
    assert 'btp_tool_calls_total{tool="list_trips",outcome="error"} 1' in text


def test_metrics_unreachable_redis_never_fails_a_request(fresh_app):
    import time

    broken = fresh_app(REDIS_URL="redis://127.0.0.1:1/0")
    assert broken.test_client().get("/healthz").status_code == 200
    with broken.app_context():
        paused_until = getattr(get_redis(), "_btp_metrics_paused_until", 0.0)
    assert paused_until > time.monotonic()  # the next 30 s of observations skip this Redis


# Who may scrape /metrics.

def _scrape(fresh_app, remote="127.0.0.1", headers=None, **settings):
    app = fresh_app(**settings)
    return app.test_client().get("/metrics", headers=headers or {}, environ_base={"REMOTE_ADDR": remote})


def test_without_a_token_loopback_may_scrape_unless_a_proxy_is_trusted(app, fresh_app):
    assert _scrape(fresh_app).status_code == 200
    assert _scrape(fresh_app, remote="203.0.113.9").status_code == 404
    # Behind a proxy every outside request comes from loopback: without a token, nobody.
    assert _scrape(fresh_app, BTP_TRUSTED_PROXIES="1").status_code == 404
    spoofed = {"X-Forwarded-For": "127.0.0.1"}
    assert _scrape(fresh_app, remote="203.0.113.9", headers=spoofed, BTP_TRUSTED_PROXIES="1").status_code == 404


def test_with_a_token_the_bearer_decides_from_any_address(app, fresh_app):
    for headers in ({}, {"Authorization": "Bearer " + "n" * 40}, {"Authorization": TOKEN}):
        refused = _scrape(fresh_app, headers=headers, BTP_METRICS_TOKEN=TOKEN)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert "btp_" not in refused.get_data(as_text=True)
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert _scrape(fresh_app, remote="203.0.113.9", headers=good, BTP_METRICS_TOKEN=TOKEN).status_code == 200
    behind = _scrape(fresh_app, headers={**good, "X-Forwarded-For": "203.0.113.9"}, BTP_TRUSTED_PROXIES="1",
                     BTP_METRICS_TOKEN=TOKEN)
    assert behind.status_code == 200 and "btp_trips" in behind.get_data(as_text=True)


@pytest.mark.parametrize("token", ["short", "x" * 31, "x" * 20 + " " + "x" * 20, "x" * 513])
def test_a_weak_metrics_token_is_refused(token):
    with pytest.raises(ConfigError, match="BTP_METRICS_TOKEN must be 32 to 512"):
        load_config(environ={"BTP_METRICS_TOKEN": token})


def test_a_served_worker_sends_its_request_counters_a_moment_late_and_summed(fresh_app):
    """A served web worker (BTP_METRICS_DEFER_S > 0) makes no metrics round trip for most requests: the counters
    are summed in process and sent by the first request past the delay, by its daemon thread when it goes quiet,
    or before its own scrape."""
    import time

    from trips.core.metrics import flush_pending

    served = fresh_app(BTP_METRICS_DEFER_S=2.0)  # long enough for three requests on a loaded machine
    client = served.test_client()
    key, field = "btp:metrics:btp_http_requests_total", '["GET","/healthz","200"]'
    with served.app_context():
        redis = get_redis()
        try:
            before = int(redis.hget(key, field) or 0)
            for _ in range(3):
                assert client.get("/healthz").status_code == 200
            assert int(redis.hget(key, field) or 0) == before  # summed in process: nothing sent yet
            deadline = time.monotonic() + 10
            while int(redis.hget(key, field) or 0) != before + 3:  # the quiet worker's thread sends them
                assert time.monotonic() < deadline, "the deferred counters were never sent"
                time.sleep(0.05)
            client.get("/healthz")
            text = client.get("/metrics").get_data(as_text=True)  # its own are flushed before it renders
            assert f'btp_http_requests_total{{method="GET",route="/healthz",status="200"}} {before + 4}' in text
        finally:
            flush_pending(redis)


def test_a_signed_in_page_names_its_user_and_an_answer_that_never_read_the_session_varies_on_nothing(
        app, client, ctx, json_lines):
    import sqlalchemy as sa

    from oauth.kernel.models import User
    from tests.oauth.test_oauth_flow import sign_in
    from trips.core.db import db

    plain = app.test_client().get("/no/such/page")  # neither a bearer nor the session read: no Vary: Cookie
    assert "Cookie" not in plain.headers.get("Vary", "")
    sign_in(app, client)
    client.get("/account")  # the page reads the session: the line names the user
    user = db.session.scalar(sa.select(User).where(User.email == "rider@example.org"))
    lines = access(json_lines())
    assert lines[0]["user_id"] is None and lines[-1]["route"] == "/account"
    assert lines[-1]["user_id"] == str(user.id)
