"""BTP served for real from a test: gunicorn (or a worker) on the test configuration, in subprocesses."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def stop(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM `proc`, and SIGKILL it when it has not ended within `grace` seconds (a server's graceful stop)."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(app_config: dict, **overrides) -> dict:
    """The process environment of the test app: its database, Redis and BTP_* settings, nothing inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_")}
    env.update({k: str(v) for k, v in app_config.items() if k.startswith(("BTP_", "DATABASE_URL", "REDIS_URL"))})
    env.update(overrides)
    return env


@dataclass
class Live:
    url: str
    env: dict
    log: Path
    proc: subprocess.Popen | None = None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@contextmanager
def gunicorn(app_config: dict, log: Path, workers: int = 2, own_base_url: bool = False, args: tuple = ()):
    """Serve the test app; with `own_base_url` its BTP_BASE_URL is where it listens (tokens and links then
    name that address); `args`: more gunicorn options (after gunicorn.conf.py's)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = server_env(app_config, **({"BTP_BASE_URL": url} if own_base_url else {}))
    with open(log, "wb") as sink:
        proc = subprocess.Popen([str(BIN / "gunicorn"), "--no-control-socket", "--workers", str(workers),
                                 "--bind", f"127.0.0.1:{port}",
                                 "--timeout", "60", *args, "wsgi:app"], env=env, cwd=ROOT, stdout=sink,
                                stderr=subprocess.STDOUT)
    live = Live(url, env, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, f"gunicorn did not start:\n{live.log_tail()}"
            time.sleep(0.1)
        live.proc = proc
        yield live
    finally:
        stop(proc)
