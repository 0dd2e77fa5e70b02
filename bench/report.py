"""Every bench/out/*.json as one markdown table, printed and written to bench/out/summary.md.

    .venv/bin/python bench/report.py [--out DIR] [--failed "SCRIPT ..."]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = ("bench", "figure", "BTP", "baseline", "ratio", "target", "met")


def _num(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}".replace(",", " ")
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ") if abs(value) >= 10000 else str(value)
    return str(value)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _met(value) -> str:
    return {True: "yes", False: "**NO**", None: "–"}.get(value, str(value))


def load(out: Path) -> tuple[list[dict], list[str]]:
    """The result documents in out/ (sorted by name) and the files that could not be read."""
    docs, bad = [], []
    for path in sorted(out.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
                raise ValueError("no rows")
            doc.setdefault("bench", path.stem)
            docs.append(doc)
        except (OSError, ValueError) as exc:
            bad.append(f"{path.name}: {str(exc)[:120]}")
    return docs, bad


def table(docs: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * len(COLUMNS)) + "|"]
    for doc in docs:
        for r in doc["rows"]:
            unit = r.get("unit") or ""
            btp = _num(r.get("btp"))
            base = _num(r.get("baseline"))
            if r.get("baseline") is not None and r.get("baseline_name"):
                base = f"{base} ({r['baseline_name']})"
            cells = (
                doc["bench"],
                f"{r.get('figure', '?')} ({unit})" if unit else r.get("figure", "?"),
                btp,
                base,
                _num(r.get("ratio")),
                r.get("target") or "–",
                _met(r.get("met")),
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def render(docs: list[dict], bad: list[str], failed=()) -> str:
    parts = ["# Benchmark summary", ""]
    for doc in docs:
        m = doc.get("machine") or {}
        parts.append(f"- {doc['bench']}: {doc.get('when', '?')}, {m.get('cpus', '?')} CPUs, load {m.get('load', '?')}")
    parts += ["", table(docs), ""]
    missed = [(d["bench"], r.get("figure")) for d in docs for r in d["rows"] if r.get("met") is False]
    parts.append(f"Targets missed: {len(missed)}" + ("" if not missed else " — " + "; ".join(f"{b}: {f}" for b, f in missed)))
    notes = [(d["bench"], n) for d in docs for n in d.get("notes") or []]
    if notes:
        parts += ["", "## Notes", ""] + [f"- {b}: {_cell(n)}" for b, n in notes]
    if bad:
        parts += ["", "## Unreadable results", ""] + [f"- {b}" for b in bad]
    if failed:
        parts += ["", "## Failed scripts (their figures are missing above)", ""] + [f"- {f}" for f in failed]
    return "\n".join(parts) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "out", help="directory of the result files")
    ap.add_argument("--failed", default="", help="space-separated scripts that failed in this run (listed)")
    args = ap.parse_args(argv)
    failed = args.failed.split()
    docs, bad = load(args.out)
    if not docs and not bad and not failed:
        print(f"no results in {args.out}", file=sys.stderr)
        return 1
    text = render(docs, bad, failed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
