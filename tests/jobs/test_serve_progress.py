"""`make run` on a fresh clone says what it does from its first line: the set-up of .venv before pip's install (whose
own lines show its progress, never --quiet), then `flask serve`'s start-up steps one by one, and the URLs only once
gunicorn answers. The Makefile is run for real with a stub Python; `serve` with its slow parts stubbed."""
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from tests.live import ROOT

STUB = """#!/bin/sh
# A stand-in for python3, the venv's python and its flask: each says what it was asked.
case "$(basename "$0")" in
  flask) echo "stub: flask $*"; exit 0;;
esac
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && cp "$0" "$3/bin/flask" && echo "stub: venv made"; exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "stub: pip $*"; echo "stub: pip done"; exit 0; fi
echo "stub: python $*"
"""


@pytest.fixture
def clone(tmp_path) -> Path:
    """A fresh clone's Makefile and requirements.txt (no .venv, no catalogues to compile), and the stub Python."""
    for name in ("Makefile", "requirements.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    stub = tmp_path / "python3-stub"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def make_run(clone: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    done = subprocess.run(["make", "--no-print-directory", "run", f"PYTHON={clone / 'python3-stub'}"], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def at(lines: list[str], start: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(start))


def test_a_first_make_run_says_each_step_before_it_runs(clone):
    lines = make_run(clone)
    assert lines[0].startswith("==> Setting up .venv from requirements.txt")  # the very first thing it prints
    assert at(lines, "==> Creating the virtual environment") < at(lines, "stub: venv made")
    assert at(lines, "==> Installing requirements.txt") < at(lines, "stub: pip") < at(lines, "stub: pip done")
    pip = lines[at(lines, "stub: pip")].split()
    assert "--quiet" not in pip and "-q" not in pip and "requirements.txt" in pip  # pip's own lines show progress
    assert at(lines, "stub: pip done") < at(lines, "==> .venv is ready") < at(lines, "==> Starting BTP")
    assert at(lines, "==> Starting BTP") < at(lines, "stub: flask --app app serve")


def test_a_later_make_run_goes_straight_to_serve(clone):
    make_run(clone)
    lines = make_run(clone)
    assert lines[0].startswith("==> Starting BTP") and not any("pip" in line for line in lines)


@pytest.fixture
def serve(app, monkeypatch):
    """`flask serve` with its slow parts stubbed: each says it ran in the output."""
    import click
    import flask_migrate

    from jobs import cli
    from jobs.supervisor import Supervisor

    probes, started = [], threading.Event()
    monkeypatch.setattr(cli, "READY_POLL_S", 0.0)
    monkeypatch.setattr(cli, "READY_NAG_S", 0.0)
    monkeypatch.setattr(cli, "ensure_embedded_redis", lambda instance: (click.echo("(redis up)"), ("unix:///r", True))[1])
    monkeypatch.setattr(cli, "stop_embedded_redis", lambda url: None)
    monkeypatch.setattr(flask_migrate, "upgrade", lambda: click.echo("(migrated)"))
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)  # pytest keeps its own Ctrl-C

    def run(self):
        click.echo("(children started)")
        started.set()
        while len(probes) < 3:  # the supervisor runs while gunicorn starts: three probes, the last answered
            threading.Event().wait(0.01)
        ready = [t for t in threading.enumerate() if t.name == "btp-ready"]
        for thread in ready:
            thread.join(5)
        return 0

    monkeypatch.setattr(Supervisor, "run", run)
    monkeypatch.setitem(app.config, "REDIS_URL", None)  # the embedded Redis of `make run`

    def invoke(answer_on: int | None):
        def answers(url):  # gunicorn answers once started, at the `answer_on`th probe from then
            if started.is_set():
                probes.append(url)
            return len(probes) == answer_on

        monkeypatch.setattr(cli, "answers", answers)
        result = app.test_cli_runner().invoke(args=["serve"])
        assert result.exit_code == 0, result.output
        return [line for line in result.output.splitlines() if line.strip()], probes

    return invoke


def test_serve_says_each_start_up_step_as_it_begins(serve, app):
    lines, probes = serve(answer_on=3)
    assert at(lines, "==> Starting the embedded Redis") < at(lines, "(redis up)")
    assert at(lines, "(redis up)") < at(lines, "==> Migrating the database") < at(lines, "(migrated)")
    assert at(lines, "(migrated)") < at(lines, "==> Starting gunicorn (2 workers)") < at(lines, "(children started)")
    # The URLs once gunicorn answers its probe, not before.
    assert at(lines, "(children started)") < at(lines, "BTP is serving on http://")
    assert sum(line.startswith("BTP is serving") for line in lines) == 1 and len(probes) == 3
    assert probes[0].endswith(f":{app.config['BTP_PORT']}/healthz")


def test_serve_says_it_still_waits_while_gunicorn_does_not_answer(serve):
    lines, probes = serve(answer_on=None)
    assert any(line.startswith("... still waiting for gunicorn to answer") for line in lines)
    assert not any(line.startswith("BTP is serving") for line in lines) and len(probes) >= 3
