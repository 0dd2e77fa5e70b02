"""`flask serve` (what `make run` starts) keeps serving when its worker dies: a new worker, the job done anyway.

A real `flask serve` on a free port with its own instance directory, SQLite file and embedded Redis.
"""
import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from jobs.worker import ABANDON_SLACK_S, MAINTENANCE_S
from trips.core.queue import BEAT_S
from tests.fakes.thirdparty import make_points
from tests.live import BIN, ROOT, free_port, server_env
from tests.procs import _stats, horse_of, wait_for

pytestmark = pytest.mark.slow
# README "When something dies": a job whose worker died runs again once its execution lapses and maintenance runs.
TAKEN_BACK_S = BEAT_S + ABANDON_SLACK_S + MAINTENANCE_S


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def workers_of(serve: subprocess.Popen) -> list[int]:
    """The worker processes serve started (not their forks: the scheduler, the work horse)."""
    return [p for p, (ppid, _) in _stats().items() if ppid == serve.pid and "worker" in cmdline(p)]


@pytest.fixture
def served(tmp_path, app_config):
    port = free_port()
    env = server_env(app_config, BTP_INSTANCE_DIR=str(tmp_path / "instance"), BTP_HOST="127.0.0.1",
                     BTP_PORT=str(port), DATABASE_URL=f"sqlite:///{tmp_path / 'btp.sqlite3'}")
    env.pop("REDIS_URL")  # the embedded Redis of `make run`, under the instance directory
    env.pop("TESTING", None)
    log = tmp_path / "serve.log"
    with open(log, "wb") as sink:
        serve = subprocess.Popen([str(BIN / "flask"), "--app", "app", "serve"], env=env, cwd=ROOT, stdout=sink,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert serve.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            return requests.get(url + "/readyz", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_for(ready, timeout=60)
        yield serve, url, env, ready
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(timeout=5)


def bearer(env: dict) -> dict:
    email = f"serve-{secrets.token_hex(4)}@example.org"
    flask = [str(BIN / "flask"), "--app", "app"]
    subprocess.run([*flask, "users", "create", email], env=env, cwd=ROOT, check=True, capture_output=True, timeout=60)
    token = subprocess.run([*flask, "tokens", "issue", email, "--audience", "api", "--scope",
                            "trips:read trips:write"], env=env, cwd=ROOT, check=True, capture_output=True,
                           timeout=60, text=True).stdout.strip()
    return {"Authorization": f"Bearer {token}"}


def test_serve_says_its_steps_then_the_urls_once_gunicorn_answers(served, tmp_path):
    serve, url, _, _ = served
    log = tmp_path / "serve.log"
    wait_for(lambda: "BTP is serving on " in log.read_text(errors="replace"), timeout=30)
    said = [line for line in log.read_text(errors="replace").splitlines() if line.startswith(("==> ", "BTP is"))]
    assert [line.split(" (")[0].split(" on ")[0] for line in said] == [
        "==> Starting the embedded Redis", "==> Migrating the database", "==> Starting gunicorn", "BTP is serving"]
    assert said[-1].startswith(f"BTP is serving on {url}")


def test_a_killed_worker_is_replaced_and_its_job_done(served, fake_thirdparty):
    serve, url, env, ready = served
    headers = bearer(env)
    fake_thirdparty.add_komoot_tour("61", "Served tour", make_points(300))
    fake_thirdparty.slow("/tour/61", 60, times=1)  # the first attempt hangs in the third party
    created = requests.post(url + "/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/61"},
                            headers={**headers, "Idempotency-Key": secrets.token_hex(16)}, timeout=10)
    assert created.status_code == 202, created.text
    trip_url = f"{url}/api/trips/{created.json()['id']}"
    wait_for(lambda: fake_thirdparty.requests_to("/tour/61") == 1)

    [worker] = workers_of(serve)
    horse = horse_of(worker)
    for pid in (worker, horse):  # kill -9, mid-job: nothing gets to clean up
        os.kill(pid, signal.SIGKILL)

    assert requests.get(url + "/healthz", timeout=5).status_code == 200  # gunicorn goes on
    assert requests.get(trip_url, headers=headers, timeout=5).status_code == 200
    wait_for(lambda: [p for p in workers_of(serve) if p != worker], timeout=30)  # a new worker
    wait_for(ready, timeout=30)

    def settled() -> bool:
        statuses = {c["name"]: c["status"] for c in requests.get(trip_url, headers=headers, timeout=5).json()
                    ["computations"]}
        # the days, then the analysis they dispatched (every enrichment settled: no map is imported here)
        return statuses.get("route") == statuses.get("stages") == "done" and not {
            s for s in statuses.values() if s in ("pending", "running")}

    wait_for(settled, timeout=TAKEN_BACK_S + 20)  # + the retry interval, the scheduler's poll, the cutting
    assert fake_thirdparty.requests_to("/tour/61") == 2
    assert serve.poll() is None


def test_the_embedded_redis_is_started_again(served):
    from trips.core.embedded_redis import socket_path, stop_embedded_redis
    from jobs.supervisor import REDIS_CHECK_S
    from jobs.worker import RECONNECT_MAX_S
    from trips.core.queue import LIVENESS_TTL

    serve, url, env, ready = served
    instance = Path(env["BTP_INSTANCE_DIR"])

    def redis_pid() -> str:
        try:
            return (instance / "redis.pid").read_text().strip()
        except OSError:
            return ""

    first = redis_pid()
    stop_embedded_redis(f"unix://{socket_path(instance)}")
    wait_for(lambda: redis_pid() not in ("", first), timeout=REDIS_CHECK_S + 10)  # a new server
    wait_for(ready, timeout=RECONNECT_MAX_S + LIVENESS_TTL)  # and the worker counted again
    assert serve.poll() is None


@pytest.fixture
def quick(monkeypatch):
    """The supervisor's clock in hundredths: the rules are the same."""
    from jobs import supervisor

    monkeypatch.setattr(supervisor, "BACKOFF_BASE_S", 0.01)
    monkeypatch.setattr(supervisor, "TICK_S", 0.01)
    return supervisor


def run_in_thread(sup):
    import threading

    result = []
    thread = threading.Thread(target=lambda: result.append(sup.run()), daemon=True)
    thread.start()
    return thread, result


def test_a_dying_worker_is_started_again_while_the_rest_goes_on(quick):
    deaths = []
    worker = quick.Child("worker", lambda: ["sh", "-c", "exit 3"], restart_for_ever=True,
                         on_death=lambda child, pid: deaths.append(pid))
    web = quick.Child("web", lambda: ["sleep", "60"], restart_for_ever=False)
    sup = quick.Supervisor([web, worker], dict(os.environ), echo=lambda line: None)
    thread, result = run_in_thread(sup)
    wait_for(lambda: worker.starts >= quick.GIVE_UP + 2, timeout=30)  # past the point gunicorn would be given up
    assert web.starts == 1 and web.proc.poll() is None
    sup.request_stop()
    thread.join(timeout=30)
    assert result == [0] and web.proc.poll() is not None
    assert len(deaths) >= quick.GIVE_UP + 1 and len(set(deaths)) == len(deaths)


def test_gunicorn_dying_at_once_again_and_again_stops_everything(quick):
    web = quick.Child("web", lambda: ["sh", "-c", "exit 1"], restart_for_ever=False)
    worker = quick.Child("worker", lambda: ["sleep", "60"], restart_for_ever=True)
    sup = quick.Supervisor([web, worker], dict(os.environ), echo=lambda line: None)
    thread, result = run_in_thread(sup)
    thread.join(timeout=30)
    assert result == [1] and web.starts == quick.GIVE_UP
    assert worker.proc.poll() is not None  # stopped with the rest


def test_backoff_doubles_up_to_its_cap_and_resets_after_a_stable_run():
    from jobs import supervisor

    sup = supervisor.Supervisor([], {}, echo=lambda line: None)
    child = supervisor.Child("worker", lambda: [], restart_for_ever=True)

    class Exited:
        returncode, pid = 1, 0

    delays = []
    for ran in (0, 0, 0, 0, 0, 0, 0, supervisor.STABLE_S + 1):
        child.proc, child.started_at = Exited(), supervisor.time.monotonic() - ran
        sup._reap(child)
        delays.append(round(child.next_start - supervisor.time.monotonic()))
    assert delays == [1, 2, 4, 8, 16, 30, 30, 1]
