"""The floors of docs/ARCHITECTURE.md on the code as it is: import-linter's contracts (pyproject.toml), no import circle
between any two modules, package __init__ files that import nothing, a function-local import only with its reason,
no product file over 400 lines. Every import counts, those inside functions included (grimp reads them all)."""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("trips", "mcp", "oauth", "jobs", "httpworker")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
MAX_LINES = 400


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_import_contracts_are_kept():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _copy_with_import(tmp_path: Path, module: str, target: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the project where `module` (a path under the root) imports `target` in a function."""
    for name in (*PACKAGES, "pyproject.toml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    path = tmp_path / module
    package, _, name = target.rpartition(".")
    path.write_text(path.read_text() + f"\n\ndef _late():\n    from {package} import {name}  # noqa: F401\n")
    return lint_imports(tmp_path)


def test_a_function_local_import_that_breaks_a_floor_is_caught(tmp_path):
    """The check is not blind to imports inside functions: core importing the jobs edge in a function fails it."""
    done = _copy_with_import(tmp_path, "trips/core/text.py", "jobs.tasks")
    assert done.returncode != 0 and "Each floor imports only the floors below it BROKEN" in done.stdout, done.stdout


@pytest.mark.parametrize("module, target", [
    ("trips/providers/routes.py", "trips.route.gpx"),  # a provider is a leaf client
    ("trips/route/gpx.py", "trips.providers.http"),  # the route formats fetch nothing
    ("trips/route/geo.py", "trips.osm.store"),  # the engines stand in order: places, osm, route
    ("httpworker/worker.py", "trips.core.db"),  # the server imports nothing of the app
    ("trips/core/db.py", "httpworker.frame"),  # nor the app the server
])
def test_an_engine_or_the_server_importing_across_is_caught(tmp_path, module, target):
    done = _copy_with_import(tmp_path, module, target)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout


def module_cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_another_that_imports_it_back():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    assert len(graph.modules) > 100
    assert module_cycles(graph) == []


def test_the_cycle_finder_finds_a_circle(tmp_path):
    for name, imports in (("a", "from pkg import b"), ("b", "def f():\n    from pkg import c"), ("c", "import pkg.a"),
                          ("d", "import pkg.a")):
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / f"{name}.py").write_text(imports + "\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("pkg", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert module_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def product_files() -> list[Path]:
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    return files + [ROOT / "app.py", ROOT / "wsgi.py", ROOT / "gunicorn.conf.py"]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_files_import_nothing(package):
    """Importing trips.models must not load the REST edge, nor oauth.kernel.models the authorization server: the package
    files only say what is inside (app.py wires the edges)."""
    offenders = []
    for init in sorted((ROOT / package).rglob("__init__.py")):
        tree = ast.parse(init.read_text())
        if any(isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                isinstance(node, ast.ImportFrom) and node.module == "__future__") for node in ast.walk(tree)):
            offenders.append(str(init.relative_to(ROOT)))
    if package == "mcp":  # the registry of the thirteen tools is mcp/tools/__init__.py, by design
        offenders = [o for o in offenders if o != "mcp/tools/__init__.py"]
    assert offenders == []


def local_imports(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every import statement inside a function."""
    lines = path.read_text().split("\n")
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    found.add((inner.lineno, lines[inner.lineno - 1]))
    return sorted(found)


def test_an_import_inside_a_function_says_why():
    """Only a heavy or optional dependency kept out of start-up is imported inside a function, with the reason on
    its line (the web worker's memory: tests/jobs/test_worker_imports.py)."""
    bare = [f"{p.relative_to(ROOT)}:{line}" for p in product_files() for line, text in local_imports(p)
            if "#" not in text]
    assert bare == []


def test_the_local_import_check_sees_nested_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef f():\n    def g():\n        import json\n    import re  # why\n")
    assert [line for line, _ in local_imports(sample)] == [5, 6]


def test_no_product_file_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in product_files() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
