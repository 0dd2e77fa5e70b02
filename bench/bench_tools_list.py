"""The agent's context: how many bytes BTP's tools/list puts in every conversation before the first call.

    .venv/bin/python bench/bench_tools_list.py [--baseline REV]

Each side (this tree, and the tree at --baseline exported with `git archive`) runs in a fresh subprocess
(`--measure`) and lists the tools through /mcp on every protocol leg; sizes are compact JSON in UTF-8 bytes,
1 KB = 1024 bytes. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REV = "9df19ea"
TARGET_KB = 24  # tests/mcp/test_mcp_tools.py holds it, on every leg
AIM_KB = 23.5  # the aim on the 2026-07-28 leg (a margin for the next field)
LEGACY_LEGS = ("2025-11-25", "2025-06-18", "2025-03-26")
KB = 1024


def size(value, ascii_only: bool = False) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only).encode("utf-8"))


def measure() -> dict:
    """tools/list of the tree this process imports (its root first on sys.path), sizes in bytes."""
    import os

    sys.path.insert(0, os.getcwd())
    from flask_migrate import upgrade

    from app import create_app
    try:
        from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis
    except ImportError:  # a baseline checkout whose embedded Redis is in jobs/
        from jobs.embedded import ensure_embedded_redis, stop_embedded_redis
    from tests.factories import make_user
    from tests.mcp_helpers import legacy, mcp_token, modern

    tmp = Path(tempfile.mkdtemp(prefix="btp-tools-list-"))
    redis_url, started = ensure_embedded_redis(tmp)
    try:
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3", "BTP_INSTANCE_DIR": str(tmp),
                          "REDIS_URL": redis_url, "BTP_SECRET_KEY": "bench"}, environ={})
        with app.app_context():
            upgrade()
            token = mcp_token(app, make_user("bench@example.org"))
            client = app.test_client()
            result = modern(client, token, "tools/list").get_json()["result"]
            legs = {leg: legacy(client, token, "tools/list", version=leg).get_json()["result"] for leg in LEGACY_LEGS}
    finally:
        if started:
            stop_embedded_redis(redis_url)
        shutil.rmtree(tmp, ignore_errors=True)
    tools = {t["name"]: {"description": size(t["description"]), "input": size(t["inputSchema"]),
                         "output": size(t.get("outputSchema")) if "outputSchema" in t else 0, "all": size(t)}
             for t in result["tools"]}
    functions = [{"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]}
                 for t in result["tools"]]
    return {"utf8": size(result), "ascii": size(result, True), "legs": {k: size(v) for k, v in legs.items()},
            "legacy_utf8": size(legs["2025-11-25"]),
            "outputs": sum(t["output"] for t in tools.values()), "functions": size(functions), "tools": tools}


def run_measure(tree: Path) -> dict:
    script = tree / "bench" / "bench_tools_list.py"
    if not script.exists():
        script.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(__file__, script)
    done = subprocess.run([sys.executable, str(script), "--measure"], cwd=tree, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"measuring {tree} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline(rev: str) -> dict | None:
    tmp = Path(tempfile.mkdtemp(prefix="btp-tools-list-base-"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        return run_measure(tmp)
    except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
        print(f"baseline {rev}: {e}", file=sys.stderr)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", action="store_true", help="print this tree's sizes as JSON (internal)")
    parser.add_argument("--baseline", default=BASELINE_REV, help="the git revision to compare against")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return

    sys.path.insert(0, str(ROOT))
    from bench.common import row, write_result

    now, base = run_measure(ROOT), baseline(args.baseline)
    name = f"BTP at {args.baseline}"

    def kb(value):
        return None if value is None else round(value / KB, 2)

    def before(key):
        return None if base is None else kb(base[key])

    def leg_before(leg):
        if base is None:
            return None
        return kb(base["legs"][leg]) if "legs" in base else (kb(base["legacy_utf8"]) if leg == "2025-11-25" else None)

    every = [now["utf8"], *now["legs"].values()]
    rows = [
        row("tools/list, compact JSON, UTF-8 (2026-07-28 leg, 13 tools)", "KB", kb(now["utf8"]), before("utf8"),
            name, f"<= {AIM_KB} KB (aim; <= {TARGET_KB} KB required)", now["utf8"] <= AIM_KB * KB),
        row("tools/list, compact JSON, ASCII-escaped", "KB", kb(now["ascii"]), before("ascii"), name),
        *[row(f"tools/list, compact JSON, UTF-8 ({leg} leg)", "KB", kb(now["legs"][leg]), leg_before(leg), name,
              f"<= {TARGET_KB} KB", now["legs"][leg] <= TARGET_KB * KB) for leg in LEGACY_LEGS],
        row("output schemas, all tools", "KB", kb(now["outputs"]), before("outputs"), name),
        row("name + description + inputSchema only (what a host turns into function definitions)", "KB",
            kb(now["functions"]), before("functions"), name),
    ]
    for tool, sizes in now["tools"].items():
        was = (base or {}).get("tools", {}).get(tool)
        for part in ("description", "input", "output"):
            rows.append(row(f"{tool}: {part}", "KB", kb(sizes[part]), kb(was[part]) if was else None, name))
    notes = [f"1 KB = {KB} bytes; sizes of json.dumps(result, separators=(',', ':')) of the tools/list result",
             f"target met on every leg: {max(every) <= TARGET_KB * KB} (largest {max(every)} bytes against "
             f"{TARGET_KB * KB}); aim met on 2026-07-28: {now['utf8'] <= AIM_KB * KB} ({now['utf8']} bytes against "
             f"{int(AIM_KB * KB)})"]
    if base is None:
        notes.append(f"no baseline: {args.baseline} could not be exported or measured (see stderr)")
    path = write_result("tools_list", rows, notes)
    for r in rows[:7]:
        print(f"{r['figure']}: {r['btp']} KB (baseline {r['baseline']} KB, ratio {r['ratio']})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
