"""Node 22 and the npm clients the tests drive BTP with, installed on first use into `<repo>/.cache/node-tools`.

This machine's Node is 20; the conformance suite and the newest SDK want 22, so Node itself comes from npm
(the `node` package installs a platform binary from the registry). The exact set is tests/node/package.json;
the install is redone whenever that file changes, and guarded by a lock so parallel test processes share it.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tests" / "node" / "package.json"
CACHE = Path(os.environ.get("BTP_NODE_TOOLS", ROOT / ".cache" / "node-tools"))
INSTALL_TIMEOUT = 600


class NodeToolsUnavailable(RuntimeError):
    """npm is missing or the install failed: the message says which, with npm's own words."""


def _digest() -> str:
    return hashlib.sha256(MANIFEST.read_bytes()).hexdigest()[:16]


def node_tools() -> Path:
    """The folder whose node_modules holds the tools (installed if missing or stale). Raises NodeToolsUnavailable."""
    marker = CACHE / ".btp-installed"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == _digest() and node_binary(CACHE).exists():
            return CACHE
        npm = shutil.which("npm")
        if npm is None:
            raise NodeToolsUnavailable("npm is not installed on this machine")
        shutil.copy(MANIFEST, CACHE / "package.json")
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(CACHE)],
                              cwd=CACHE, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        if done.returncode != 0 or not node_binary(CACHE).exists():
            raise NodeToolsUnavailable(f"npm install failed ({done.returncode}): {done.stderr[-3000:]}")
        version = subprocess.run([str(node_binary(CACHE)), "--version"], capture_output=True, text=True, timeout=30)
        if not version.stdout.startswith("v22."):
            raise NodeToolsUnavailable(f"expected Node 22, got {version.stdout.strip() or version.stderr[-500:]}")
        marker.write_text(_digest())
        return CACHE


def node_binary(folder: Path = CACHE) -> Path:
    return folder / "node_modules" / ".bin" / "node"


def node_env(folder: Path = CACHE) -> dict:
    """An environment whose PATH finds Node 22 first (npm's scripts and `#!/usr/bin/env node` shebangs use it)."""
    env = dict(os.environ)
    env["PATH"] = f"{folder / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    env["NODE_PATH"] = str(folder / "node_modules")
    return env


def package_bin(name: str, folder: Path = CACHE) -> Path:
    """An installed package's command (node_modules/.bin/NAME)."""
    return folder / "node_modules" / ".bin" / name
