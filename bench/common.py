"""Shared output for the benchmarks: every script writes ``bench/out/<name>.json`` in one shape.

    {"bench": name, "when": iso, "machine": {"cpus": n, "load": [1, 5, 15 min]},
     "rows": [{"figure", "unit", "btp", "baseline", "baseline_name", "ratio", "target", "met"}],
     "notes": [...]}

``bench/report.py`` turns every file there into one table (bench/out/summary.md).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def machine() -> dict:
    """The machine the figures were taken on: CPU count and load average (1, 5, 15 min) at write time."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - no loadavg on this platform
        load = None
    return {"cpus": os.cpu_count(), "load": load, "python": platform.python_version()}


def row(figure: str, unit: str, btp, baseline=None, baseline_name=None, target=None, met=None) -> dict:
    """One figure: BTP's number, the baseline's beside it and their ratio (btp / baseline) when both exist."""
    ratio = None
    if btp is not None and baseline not in (None, 0):
        ratio = round(btp / baseline, 4)
    return {
        "figure": figure,
        "unit": unit,
        "btp": btp,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def write_result(name: str, rows, notes=(), extra: dict | None = None) -> Path:
    """Write ``bench/out/<name>.json`` (rows from ``row()``) and return its path; `extra` adds top-level keys
    (a series, a verdict) beside the common ones."""
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "rows": list(rows),
        "notes": [str(n) for n in notes],
    }
    for key, value in (extra or {}).items():
        doc.setdefault(key, value)
    path = OUT / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
