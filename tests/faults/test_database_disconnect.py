"""PostgreSQL drops every connection of BTP's database (pg_terminate_backend, as a failover or a restart does): the
next request succeeds on every gunicorn worker, and the job worker goes on running jobs.

Only this run's own database is touched (tests/faults/stack.py: `WHERE datname = <ours>`)."""
import time

import pytest

from jobs.worker import MAINTENANCE_S
from tests.factories import auth, idem, make_token, make_user
from tests.faults.stack import HttpClient, backends, terminate_backends
from tests.fakes.thirdparty import make_points
from tests.live import gunicorn
from tests.mcp_helpers import call, mcp_token, payload
from tests.procs import wait_for, worker_running
from tests.trips.services.test_pipeline import reload, structural
from tests.trips.api.test_trips_api import seed_trip
from trips.core.db import db

pytestmark = pytest.mark.slow
GUNICORN_WORKERS = 2
ROUNDS = 4 * GUNICORN_WORKERS  # requests after the cut: every gunicorn worker meets its dead pool


def test_the_next_request_after_the_connections_are_killed_succeeds(app, app_config, ctx, database_url,
                                                                    fake_thirdparty, tmp_path, measured):
    user = make_user()
    headers = auth(make_token(user))
    token = mcp_token(app, user)
    trip = seed_trip(user)
    fake_thirdparty.add_komoot_tour("91", "After the cut", make_points(600))
    with worker_running(app_config, tmp_path / "worker.log") as worker, \
            gunicorn(app_config, tmp_path / "gunicorn.log", workers=GUNICORN_WORKERS) as live:
        web = HttpClient(live.url)
        wait_for(lambda: web.get("/readyz").status_code == 200, timeout=90, what="a live worker")
        for _ in range(ROUNDS):  # every gunicorn worker holds pooled connections now
            assert web.get(f"/api/trips/{trip.id}", headers=headers).status_code == 200
        db.session.remove()  # this test's own connection back to its pool too (BTP holds none across requests)
        held = backends(database_url)
        assert held >= 3  # the gunicorn workers', the job worker's and this test's own

        killed = terminate_backends(database_url)
        assert killed >= held - 1, (killed, held)  # all but a connection that closed meanwhile
        cut = time.monotonic()
        reads = [web.get(f"/api/trips/{trip.id}", headers=headers) for _ in range(ROUNDS)]
        assert [r.status_code for r in reads] == [200] * ROUNDS, [r.get_data(as_text=True) for r in reads]
        measured("connections killed → next request answered", reads[0].seconds)
        renamed = web.patch(f"/api/trips/{trip.id}", json={"title": "After the cut"},
                            headers={**headers, "If-Match": '"1"'})
        assert renamed.status_code == 200, renamed.get_data(as_text=True)
        got = call(web, token, "get_trip", {"id": trip.id})
        assert got["isError"] is False and payload(got)["title"] == "After the cut"
        ready = web.get("/readyz")
        assert ready.status_code == 200 and ready.get_json()["checks"]["database"] == "ok"
        assert reload(trip.id).title == "After the cut"  # this process's own pool met the cut too

        # The job worker lost its connections too: a job enqueued now runs, and its maintenance (which reads
        # the database every MAINTENANCE_S) goes on.
        created = web.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/91"},
                           headers={**headers, **idem()})
        assert created.status_code == 202, created.get_json()
        wait_for(lambda: structural(reload(created.get_json()["id"])) == {"route": ("done", None),
                                                                         "stages": ("done", None)},
                 timeout=30, what="a job enqueued after the cut")
        measured("connections killed → a job enqueued after it done", time.monotonic() - cut)
        wait_for(lambda: time.monotonic() - cut > MAINTENANCE_S + 1, timeout=MAINTENANCE_S + 2)
        assert worker.poll() is None
        log = (tmp_path / "worker.log").read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
        assert "Traceback" not in live.log_tail(100_000), live.log_tail()
