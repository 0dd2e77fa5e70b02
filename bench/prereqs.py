"""What `make bench` needs beyond `.venv`, checked before any benchmark starts (README "Tests and benchmarks").

    .venv/bin/python bench/prereqs.py [--install]

Each piece missing (PostgreSQL on 127.0.0.1:5432 with PostGIS, redis-server, wrk) is named with the Debian package
that brings it; --install, as root where apt-get exists, installs them first. A PostgreSQL server that is not
running or refuses the user is only reported. Exit status 1 when something is still missing."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

PG = {"host": "127.0.0.1", "user": "postgres"}  # bench/bench_mcp.py's
TOOLS = (("redis-server", "redis-server"), ("createdb", "postgresql-client"), ("psql", "postgresql-client"),
         ("wrk", "wrk"))
NO_SERVER = ("a PostgreSQL server on 127.0.0.1:5432 that lets the user postgres in without a password: "
             "apt-get install postgresql, then in pg_hba.conf `host all postgres 127.0.0.1/32 trust` and reload it")


def _psql(run, sql: str) -> str | None:
    """One value from the server, or None when it cannot be asked."""
    try:
        done = run(["psql", "-h", PG["host"], "-U", PG["user"], "-d", "postgres", "-XtAc", sql],
                   capture_output=True, text=True, timeout=15, env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def missing(which=shutil.which, run=subprocess.run) -> list[tuple[str, str | None]]:
    """(what is missing, with how to get it; its Debian package or None) for each missing piece."""
    found = []
    for tool, package in TOOLS:
        if which(tool) is None:
            found.append((f"{tool} (Debian: apt-get install {package})", package))
    if which("psql") is None:
        return found
    version = _psql(run, "SHOW server_version_num")
    if version is None or not version.isdigit():
        found.append((NO_SERVER, None))
    elif _psql(run, "SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'") != "1":
        package = f"postgresql-{int(version) // 10000}-postgis-3"
        found.append((f"PostGIS for this PostgreSQL {int(version) // 10000} (\"extension postgis is not available\"; "
                      f"Debian: apt-get install {package})", package))
    return found


def main(argv=None, which=shutil.which, run=subprocess.run, out=sys.stderr) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true", help="apt-get install the missing packages (as root)")
    args = ap.parse_args(argv)
    gaps = missing(which, run)
    packages = sorted({package for _, package in gaps if package})
    if args.install and packages and which("apt-get") and os.geteuid() == 0:
        print(f"bench: installing {' '.join(packages)}", file=out)
        run(["apt-get", "install", "-y", "-qq", *packages], check=False)
        gaps = missing(which, run)
    for what, _ in gaps:
        print(f"bench needs {what}", file=out)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
