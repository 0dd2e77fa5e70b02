"""ruff over the tree with pyproject.toml's settings, as `make test` runs it: among them flake8-self (SLF001), so a
private member of a library (or of another object) read or written in the product fails; tests, benches,
migrations and httpworker/gunicorn_internals.py (gunicorn's internals, isolated there) may."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"
PRIVATE = "def stop(worker):\n    return worker._stop_requested\n"


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=300)


def test_the_tree_passes_ruff():
    done = ruff(".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.parametrize("path", ["jobs/worker_copy.py", "trips/core/copy.py", "app_copy.py", "httpworker/copy.py"])
def test_a_private_member_read_in_the_product_fails(path):
    done = ruff("--stdin-filename", path, "-", stdin=PRIVATE)
    assert done.returncode == 1 and "SLF001" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("path", ["tests/jobs/copy.py", "bench/copy.py", "httpworker/gunicorn_internals.py"])
def test_tests_benches_and_the_gunicorn_adapter_may(path):
    done = ruff("--stdin-filename", path, "-", stdin=PRIVATE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_werkzeugs_public_get_current_object_passes():
    done = ruff("--stdin-filename", "trips/core/copy.py", "-",
                stdin="from flask import g\n\nhere = g._get_current_object()\n")
    assert done.returncode == 0, done.stdout + done.stderr
