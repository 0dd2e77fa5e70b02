"""bench/prereqs.py: what `make bench` needs, each missing piece named with how to get it."""
import importlib.util
import io
import subprocess
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_prereqs", Path(__file__).resolve().parents[2] / "bench" / "prereqs.py")
prereqs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prereqs)

EVERYTHING = {"redis-server", "createdb", "psql", "wrk", "apt-get"}


def which_of(present):
    return lambda tool: f"/usr/bin/{tool}" if tool in present else None


def server(version="150004", postgis="1", calls=None):
    """A fake `psql` run: the server's version and whether PostGIS is available (None: the query fails)."""
    def run(argv, **kwargs):
        if calls is not None:
            calls.append(argv)
        if argv[0] != "psql":
            return subprocess.CompletedProcess(argv, 0, "", "")
        value = version if "server_version_num" in argv[-1] else postgis
        return subprocess.CompletedProcess(argv, 0 if value is not None else 2, (value or "") + "\n", "")
    return run


def test_nothing_missing():
    assert prereqs.missing(which_of(EVERYTHING), server()) == []


def test_postgis_missing_names_the_package_for_the_server_version():
    said = prereqs.missing(which_of(EVERYTHING), server(version="160002", postgis=""))
    assert said == [('PostGIS for this PostgreSQL 16 ("extension postgis is not available"; Debian: apt-get install '
                     'postgresql-16-postgis-3)', "postgresql-16-postgis-3")]


@pytest.mark.parametrize("tool, package", [("redis-server", "redis-server"), ("wrk", "wrk"),
                                           ("createdb", "postgresql-client")])
def test_a_missing_tool_is_named_with_its_package(tool, package):
    said = prereqs.missing(which_of(EVERYTHING - {tool}), server())
    assert said == [(f"{tool} (Debian: apt-get install {package})", package)]


def test_a_server_that_cannot_be_asked_is_said_so():
    said = prereqs.missing(which_of(EVERYTHING), server(version=None))
    assert said == [(prereqs.NO_SERVER, None)]


def test_main_reports_and_fails_without_installing_when_not_root(monkeypatch):
    monkeypatch.setattr(prereqs.os, "geteuid", lambda: 1000)
    calls, out = [], io.StringIO()
    code = prereqs.main(["--install"], which_of(EVERYTHING - {"wrk"}), server(calls=calls), out)
    assert code == 1 and out.getvalue() == "bench needs wrk (Debian: apt-get install wrk)\n"
    assert not [c for c in calls if c[0] == "apt-get"]


def test_main_installs_the_missing_packages_as_root_then_checks_again(monkeypatch):
    monkeypatch.setattr(prereqs.os, "geteuid", lambda: 0)
    installed, calls, out = set(), [], io.StringIO()
    fake_server = server(calls=calls)

    def run(argv, **kwargs):
        if argv[0] == "apt-get":
            installed.add("wrk")
        return fake_server(argv, **kwargs)

    code = prereqs.main(["--install"], lambda tool: which_of((EVERYTHING - {"wrk"}) | installed)(tool), run, out)
    assert code == 0 and out.getvalue() == "bench: installing wrk\n"
