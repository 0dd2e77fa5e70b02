"""The import layers: oauth/ and trips/core/ import no feature code of trips.

App-wide infrastructure lives in trips/core (what oauth/ and mcp/ may import); the domain's errors and tables
are shared too. Every import statement counts, those inside functions included.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("trips.core", "trips.errors", "trips.models")


def trips_imports(path: Path) -> list[str]:
    """The trips.* modules `path` imports (`from trips import x` counts as trips.x)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "trips" or a.name.startswith("trips.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "trips":
                found += [f"trips.{a.name}" for a in node.names]
            elif node.module.startswith("trips."):
                found.append(node.module)
    return found


def feature_imports(path: Path) -> list[str]:
    return [m for m in trips_imports(path) if not any(m == s or m.startswith(s + ".") for s in SHARED)]


@pytest.mark.parametrize("package", ["oauth", "trips/core"])
def test_infrastructure_imports_no_feature_code_of_trips(package):
    offenders = {str(p.relative_to(ROOT)): feature_imports(p) for p in sorted((ROOT / package).rglob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_every_form_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import trips.services.trips\nfrom trips import readmodels\nfrom trips.core.db import db\n"
                      "def late():\n    from trips.route.geo import haversine_m\n")
    assert feature_imports(sample) == ["trips.services.trips", "trips.readmodels", "trips.route.geo"]
