"""The type checker over the packages pyproject.toml's [tool.mypy] names, with that configuration, as `make test`
runs it; and a module with a type error in an unannotated function fails the same check."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"
CONFIG = ROOT / "pyproject.toml"


def mypy(*files: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(MYPY), "--config-file", str(CONFIG), *files], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def checked_files() -> int:
    folders = tomllib.loads(CONFIG.read_text())["tool"]["mypy"]["files"]
    return sum(1 for folder in folders for _ in (ROOT / folder).rglob("*.py"))


def test_the_checked_packages_type_check():
    done = mypy()
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"no issues found in {checked_files()} source files" in done.stdout, done.stdout


def test_a_type_error_fails_the_check(tmp_path):
    """Not blind: an error in a function without annotations is reported (check_untyped_defs), with the config."""
    module = tmp_path / "lru_copy.py"
    module.write_text((ROOT / "trips" / "core" / "lru.py").read_text()
                      + "\n\ndef _sized():\n    return LRU('four').size\n")
    done = mypy(str(module))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'lru_copy.py:' in done.stdout and '"LRU" has incompatible type "str"' in done.stdout, done.stdout
