"""Running `conformance server` (npm @modelcontextprotocol/conformance) and reading what it found.

The suite writes one `checks.json` per scenario under `<out>/server-<scenario>-<timestamp>/`; each check has an
`id` and a `status` (SUCCESS, FAILURE, WARNING, INFO, SKIPPED). A check is unmet when any of its instances is a
FAILURE or a WARNING (the suite's own baseline rule); the figures are the suite's: SUCCESS and FAILURE counted
over every instance.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.node_tools import node_env, node_tools, package_bin

RUN_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
UNMET = ("FAILURE", "WARNING")


@dataclass
class Outcome:
    revision: str
    checks: dict[str, list[dict]] = field(default_factory=dict)  # scenario → its checks, as the suite wrote them
    output: str = ""

    @property
    def passed(self) -> int:
        return sum(c["status"] == "SUCCESS" for cs in self.checks.values() for c in cs)

    @property
    def failed(self) -> int:
        return sum(c["status"] == "FAILURE" for cs in self.checks.values() for c in cs)

    def unmet(self) -> dict[str, str]:
        """`scenario/check-id` → the suite's error message, for every unmet check."""
        found: dict[str, str] = {}
        for scenario, checks in self.checks.items():
            for check in checks:
                if check["status"] in UNMET:
                    found.setdefault(f"{scenario}/{check['id']}", (check.get("errorMessage") or
                                                                   check.get("description") or "")[:300])
        return found

    def met(self) -> set[str]:
        ids = {f"{s}/{c['id']}" for s, cs in self.checks.items() for c in cs if c["status"] == "SUCCESS"}
        return ids - set(self.unmet())


def run_suite(url: str, revision: str, out: Path, timeout: int = 240) -> Outcome:
    """`conformance server --url URL --requirements REVISION -o OUT`; raises AssertionError if it wrote nothing."""
    folder = node_tools()
    done = subprocess.run([str(package_bin("conformance", folder)), "server", "--url", url, "--requirements", revision,
                           "-o", str(out), "--timeout", "20000"],
                          env=node_env(folder), capture_output=True, text=True, timeout=timeout)
    outcome = Outcome(revision, output=done.stdout[-20000:] + done.stderr[-5000:])
    for checks_file in sorted(out.glob("server-*/checks.json")):
        match = RUN_DIR.match(checks_file.parent.name)
        assert match, checks_file
        outcome.checks.setdefault(match["scenario"], []).extend(json.loads(checks_file.read_text()))
    assert outcome.checks, f"the suite wrote no results (exit {done.returncode}):\n{outcome.output[-3000:]}"
    return outcome
