"""Two web nodes and two job workers on one PostgreSQL and one Redis behind deploy/nginx.conf (README "Scaling out"): an
edit through one node is read at once through the other; a node and a worker SIGKILLed under a write load lose no
answered write, and every computation settles within README "When something dies"'s bound."""
import threading
import time
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from jobs.worker import ABANDON_SLACK_S, MAINTENANCE_S
from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import make_points
from tests.faults.stack import HttpClient, nodes
from tests.live import free_port
from tests.mcp_helpers import call, mcp_token, payload
from tests.procs import horse_of, kill, wait_for, worker_running
from tests.clients.test_nginx import nginx_running, prepared, render_site
from tests.trips.services.test_pipeline import reload, structural
from tests.trips.api.test_trips_api import seed_trip
from trips.computations import ACTIVE
from trips.core.db import db
from trips.core.queue import BEAT_S, live_workers
from trips.core.redis_client import get_redis
from trips.models import Computation, Trip

pytestmark = pytest.mark.slow
EDITS = 40  # edits through one node, each read at once through the other
LOAD_S = 10  # seconds of load through nginx; the kills fall in its first third
# A trip made is a route fetch, a cutting into days and ~15 enrichments for the workers; an analysis ~15: paced so
# that the one worker left (worker 1 holds the held trip's fetch, then dies) keeps up with them.
CREATE_EVERY_S, ANALYZE_EVERY_S = 1.5, 2.0
LIFTED = "1000000/60"
# README "When something dies": a killed worker's job lapses BEAT_S + ABANDON_SLACK_S after its last beat and is
# taken back at the next maintenance; then its retry waits 1 s and the scheduler's poll.
SETTLE_BOUND_S = BEAT_S + ABANDON_SLACK_S + MAINTENANCE_S + 10
TRIP_LOCK_TTL_S = 30  # trips/core/db.py `atomic`: a trip's write lock in Redis outlives a node killed holding it
RETRIED = (502, 503, 504)  # what nginx answers for a node that died under the request: the client retries


def two_node_site(ports: list[int], tls_port: int, http_port: int, folder: Path, cert: Path, key: Path) -> str:
    """deploy/nginx.conf whose upstream lists every node (its one `server` line becomes one per node)."""
    site = render_site(ports[0], tls_port, http_port, folder, cert, key)
    line = f"server 127.0.0.1:{ports[0]};"
    assert site.count(line) == 1
    return site.replace(line, "\n    ".join(f"server 127.0.0.1:{port};" for port in ports))


def through_nginx(url: str, cert: Path) -> HttpClient:
    client = HttpClient(url, timeout=20)
    client.session.verify = str(cert)
    client.session.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, replaces `verify`
    return client


@pytest.fixture
def cluster(app, app_config, tmp_path, fake_thirdparty):
    """(node A, node B, nginx, worker 1, settings, logs): worker 1 starts first and alone, worker 2 is the test's."""
    settings = {**app_config, "BTP_TRUSTED_PROXIES": "1", "BTP_LIMIT_TRIP_CREATE": LIFTED,
                "BTP_LIMIT_MCP_CALLS": LIFTED, "BTP_LIMIT_MCP_WRITES": LIFTED, "BTP_LIMIT_MCP_ADDRESS": LIFTED}
    folder = tmp_path / "nginx"
    folder.mkdir()
    cert, key = prepared(folder)
    tls_port, http_port = free_port(), free_port()
    with worker_running(settings, tmp_path / "worker-1.log") as first, \
            nodes(settings, tmp_path, ("node-a", "node-b"), workers=1) as (a, b):
        ports = [int(live.url.rsplit(":", 1)[1]) for live in (a, b)]
        with nginx_running(folder, two_node_site(ports, tls_port, http_port, folder, cert, key), tls_port):
            yield a, b, through_nginx(f"https://127.0.0.1:{tls_port}", cert), first, settings, tmp_path


def test_an_edit_through_one_node_is_read_at_once_through_the_other(app, ctx, cluster):
    a, b, front, *_ = cluster
    user = make_user()
    headers, token = auth(make_token(user)), mcp_token(app, user)
    one, other = HttpClient(a.url), HttpClient(b.url)
    trip_id = seed_trip(user).id
    day = one.get(f"/api/trips/{trip_id}", headers=headers).get_json()["stages"][0]["stageId"]
    version = 1
    for i in range(1, EDITS + 1):  # a day's label: the version moves by one, nothing is computed again
        writer, reader = (one, other) if i % 2 else (other, one)  # both ways
        edited = writer.patch(f"/api/trips/{trip_id}/stages/{day}", json={"label": f"Edit {i}"},
                              headers={**headers, "If-Match": f'"{version}"'})
        assert (edited.status_code, edited.headers.get("ETag")) == (200, f'"{version + 1}"'), \
            edited.get_data(as_text=True)
        version += 1
        read = reader.get(f"/api/trips/{trip_id}", headers=headers)
        assert (read.status_code, read.headers["ETag"], read.get_json()["stages"][0]["label"]) == \
            (200, f'"{version}"', f"Edit {i}")
        assert payload(call(reader, token, "get_trip", {"id": trip_id}))["version"] == version  # kept per process
    assert front.get(f"/api/trips/{trip_id}", headers=headers).get_json()["stages"][0]["label"] == f"Edit {EDITS}"
    # An edit of a version the other node already moved past is refused there: both read the one database.
    stale = one.patch(f"/api/trips/{trip_id}/stages/{day}", json={"label": "Stale"},
                      headers={**headers, "If-Match": f'"{version - 1}"'})
    assert stale.status_code == 412, stale.get_data(as_text=True)


class Load:
    """Writes through nginx from three threads until stopped: trip creations (each with an Idempotency-Key, sent
    again with the same key when nginx answers that the node died under it), chained edits of one trip, and
    analyze_trip calls. Records what was answered 2xx."""

    def __init__(self, app, front: HttpClient, user, tour_ids: list[str]):
        self.front, self.tours = front, tour_ids
        self.local = threading.local()  # a requests session per thread
        self.headers, self.token = auth(make_token(user)), mcp_token(app, user)
        self.edited_trip, self.analyzed_trip = seed_trip(user).id, seed_trip(user).id
        self.created: dict[str, str] = {}  # Idempotency-Key → trip id
        self.edits: list[tuple[int, str]] = []  # (version, title) of every edit answered 200
        self.locked_out: list[float] = []  # when an edit was refused 409: the trip's lock is another's
        self.analyses = 0
        self.failures: list[str] = []  # answers that are neither a success nor an expected refusal
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._guarded, args=(work,), daemon=True)
                        for work in (self._create, self._edit, self._analyze)]

    def _guarded(self, work) -> None:
        self.local.client = through_nginx(self.front.base_url, Path(self.front.session.verify))
        try:
            while not self.stop.is_set():
                work()
        except Exception as exc:  # the test reads it; a thread's exception would otherwise be lost
            self.failures.append(repr(exc))

    def _send(self, method: str, path: str, **kw):
        """One request through nginx; None when the connection broke under it."""
        try:
            return self.local.client.open(method, path, **kw)
        except requests.RequestException:
            return None

    def _create(self) -> None:
        key = idem()
        body = {"sourceUrl": f"https://www.komoot.com/tour/{self.tours[len(self.created) % len(self.tours)]}"}
        for _ in range(5):
            answer = self._send("POST", "/api/trips", json_body=body, headers={**self.headers, **key})
            if answer is not None and answer.status_code not in RETRIED:
                break
            time.sleep(0.2)
        if answer is not None and answer.status_code in (200, 202):
            self.created[key["Idempotency-Key"]] = answer.get_json()["id"]
        else:
            self.failures.append(f"create: {answer and answer.status_code}")
        self.stop.wait(CREATE_EVERY_S)

    def _edit(self) -> None:
        read = self._send("GET", f"/api/trips/{self.edited_trip}", headers=self.headers)
        if read is None or read.status_code != 200:
            return
        title, day = f"Edit {len(self.edits) + 1}", read.get_json()["stages"][0]["stageId"]
        answer = self._send("PATCH", f"/api/trips/{self.edited_trip}/stages/{day}", json_body={"label": title},
                            headers={**self.headers, "If-Match": read.headers["ETag"]})
        if answer is not None and answer.status_code == 200:
            self.edits.append((int(answer.headers["ETag"].strip('"')), title))
        elif answer is not None and answer.status_code == 409:
            self.locked_out.append(time.monotonic())
            self.stop.wait(0.5)
        elif answer is not None and answer.status_code not in (*RETRIED, 412):  # 412: an unanswered edit landed
            self.failures.append(f"edit: {answer.status_code}")

    def _analyze(self) -> None:
        try:
            result = call(self.local.client, self.token, "analyze_trip", {"id": self.analyzed_trip})
        except (requests.RequestException, AssertionError, TypeError):  # nginx's 502 page is no JSON-RPC answer
            return
        if result["isError"] is False:
            self.analyses += 1
        elif payload(result)["error"]["code"] not in ("conflict", "unavailable"):  # analysis still running
            self.failures.append(f"analyze: {payload(result)}")
        self.stop.wait(ANALYZE_EVERY_S)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def unsettled(user_id) -> list[tuple]:
    db.session.rollback()
    return db.session.execute(sa.select(Computation.trip_id, Computation.name, Computation.status)
                              .join(Trip, Trip.id == Computation.trip_id)
                              .where(Trip.user_id == user_id, Computation.status.in_(ACTIVE))).all()


def test_a_node_and_a_worker_killed_under_load_lose_no_write_and_leave_nothing_unsettled(
        app, ctx, cluster, fake_thirdparty, measured):
    a, b, front, first, settings, logs = cluster
    user = make_user()
    tours = [str(900 + i) for i in range(4)]
    for tour in tours:
        fake_thirdparty.add_komoot_tour(tour, f"Tour {tour}", make_points(150))
    fake_thirdparty.add_komoot_tour("999", "Held tour", make_points(150))
    fake_thirdparty.slow("/tour/999", 60, times=1)
    wait_for(lambda: front.get("/readyz").status_code == 200, timeout=60, what="worker 1 to count as live",
             logs=(logs / "worker-1.log",))

    # Worker 1, alone, takes the held trip's route fetch: it is mid-job when it is killed below.
    held = front.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/999"},
                      headers={**auth(make_token(user)), **idem()})
    assert held.status_code == 202, held.get_data(as_text=True)
    held_id = held.get_json()["id"]
    wait_for(lambda: fake_thirdparty.requests_to("/tour/999") == 1, timeout=30, what="worker 1 to fetch the route")
    assert horse_of(first.pid) is not None
    with worker_running(settings, logs / "worker-2.log") as second, Load(app, front, user, tours) as load:
        wait_for(lambda: len(live_workers(get_redis())) == 2, timeout=60, what="worker 2 to count as live",
                 logs=(logs / "worker-2.log",))
        time.sleep(LOAD_S / 3)
        killed = time.monotonic()
        kill(b.proc)  # the gunicorn arbiter and its workers, SIGKILL: in-flight requests die with them
        kill(first)  # the worker, its scheduler and its work horse, mid-fetch
        time.sleep(LOAD_S * 2 / 3)
        load.stop.set()
        # Worker 2 alone settles what is left (it is killed when this block ends).
        wait_for(lambda: not unsettled(user.id), timeout=SETTLE_BOUND_S - (time.monotonic() - killed),
                 what=f"every computation to settle ({len(load.created)} trips made, {load.analyses} analyses)",
                 logs=(logs / "worker-2.log",))
        measured("web node and worker SIGKILLed under load → every computation settled (from the kill)",
                 time.monotonic() - killed, f"{SETTLE_BOUND_S} s")
        assert second.poll() is None

    assert not load.failures, load.failures
    assert len(load.created) >= 5 and len(load.edits) >= 5 and load.analyses >= 1, \
        (len(load.created), len(load.edits), load.analyses)
    survivor = HttpClient(a.url)
    headers = load.headers
    with pytest.raises(requests.ConnectionError):
        HttpClient(b.url, timeout=2).get("/healthz")  # the killed node is gone
    # Every creation answered is there, once per Idempotency-Key, through the surviving node and through nginx.
    assert len(set(load.created.values())) == len(load.created)
    for trip_id in load.created.values():
        assert survivor.get(f"/api/trips/{trip_id}", headers=headers).status_code == 200
        assert front.get(f"/api/trips/{trip_id}", headers=headers).status_code == 200
    db.session.rollback()
    made = db.session.scalars(sa.select(Trip.id).where(Trip.user_id == user.id)).all()
    assert len(made) == len(load.created) + 3  # the held and the two seeded trips besides: no duplicate
    # Every edit answered is there: the last one answered, or a later one (sent, unanswered, but committed).
    last_version, last_title = load.edits[-1]
    assert [version for version, _ in load.edits] == sorted({version for version, _ in load.edits})  # chained
    now = survivor.get(f"/api/trips/{load.edited_trip}", headers=headers)
    assert int(now.headers["ETag"].strip('"')) >= last_version
    if int(now.headers["ETag"].strip('"')) == last_version:
        assert now.get_json()["stages"][0]["label"] == last_title
    # An edit in flight on the killed node holds the trip's lock until its TTL: the trip's edits are refused 409
    # (never lost, never a 500) from the kill until then, and go through again afterwards.
    assert all(when >= killed for when in load.locked_out), "refused 409 before any node was killed"
    day = now.get_json()["stages"][0]["stageId"]

    def edit_lands() -> bool:
        current = front.get(f"/api/trips/{load.edited_trip}", headers=headers)
        return front.patch(f"/api/trips/{load.edited_trip}/stages/{day}", json={"label": "After"},
                           headers={**headers, "If-Match": current.headers["ETag"]}).status_code == 200

    wait_for(edit_lands, timeout=max(TRIP_LOCK_TTL_S + 2 - (time.monotonic() - killed), 1),
             what="the trip's lock to lapse")
    # Nothing left unsettled: every failure says why; the held trip was taken back by worker 2 and cut into days.
    db.session.rollback()
    failed = db.session.execute(sa.select(Computation.name, Computation.reason)
                                .join(Trip, Trip.id == Computation.trip_id)
                                .where(Trip.user_id == user.id, Computation.status == "failed")).all()
    assert all(reason for _, reason in failed), failed
    assert structural(reload(held_id)) == {"route": ("done", None), "stages": ("done", None)}
    assert fake_thirdparty.requests_to("/tour/999") == 2  # the killed attempt and the retry
