"""A script sent on this thread's own Redis connection now, its answer read later (`send` → `Pending.reply`).

The budgets' round trip that every MCP call makes (trips/core/ratelimit.py `start_hits`) goes this way, so the caller
reads its database while Redis answers. Each thread keeps one connection per client outside redis-py's pool: taking
a pooled connection and giving it back costs redis-py about as much CPU as the round trip itself (its lock, pid and
liveness checks, its connection metrics; measured on the 2-core bench machine: 70 us of 160 per command). Checking
that the kept connection is still open costs one poll(2). It carries one call at a time: a script sent while it
waits for an answer goes through the pool instead, when its answer is asked for.

What is guarded: a connection the server closed (a restart, `CLIENT KILL`) is made again before the script is
sent; an answer interrupted mid-read drops the connection (what is left unread must never be taken for the next
answer); a forked child makes its own (it never shares its parent's socket); a script the server no longer knows
(NOSCRIPT after a restart) is run again through the pool, which loads it; the client's own health check (a PING
after `health_check_interval` idle seconds) still applies.
"""
from __future__ import annotations

import os
import select
import threading

import redis as redis_lib

_LINE_ATTR = "_btp_redis_line"  # kept on the client: one Line per client, each thread its own connection
_making = threading.Lock()


class Line(threading.local):
    """This thread's connection to one client's server."""

    def __init__(self):
        self.conn, self.pid, self.busy = None, None, False

    def take(self, pool):
        """The connection, connected and with nothing unread on it, marked busy; None when it is busy already.
        Raises what connecting raises."""
        if self.busy:
            return None
        conn = self.conn
        if conn is None or self.pid != os.getpid():
            conn = self.conn = pool.connection_class(**pool.connection_kwargs)
            self.pid = os.getpid()
        conn.connect()  # nothing to do while connected
        if _stale(conn):
            conn.disconnect()
            conn.connect()
        self.busy = True
        return conn

    def give_back(self, conn, broken: bool = False) -> None:
        if broken:
            conn.disconnect()
        self.busy = False


def _stale(conn) -> bool:
    """True when the idle connection has something to read: the server closed it (EOF) or sent what nobody asked
    for. Either way its next answer could not be trusted."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def line_of(redis) -> Line:
    line = getattr(redis, _LINE_ATTR, None)
    if line is None:
        with _making:  # one per client: another thread's connections must not be dropped with a second one
            line = getattr(redis, _LINE_ATTR, None)
            if line is None:
                line = Line()
                setattr(redis, _LINE_ATTR, line)
    return line


class Pending:
    """A script sent on the thread's connection; `reply()` reads its answer (exactly once)."""

    __slots__ = ("redis", "script", "keys", "args", "conn", "line")

    def __init__(self, redis, script, keys, args, conn=None, line=None):
        self.redis, self.script, self.keys, self.args, self.conn, self.line = redis, script, keys, args, conn, line

    def reply(self):
        """The script's answer. Raises redis errors and OSError (the connection is then dropped), and whatever the
        script raises."""
        conn, self.conn = self.conn, None
        if conn is None:  # the thread's connection was busy when it was sent: through the pool now
            return self.script(keys=self.keys, args=self.args)
        try:
            answer = conn.read_response()
        except redis_lib.exceptions.NoScriptError:  # a Redis restarted since the script was loaded: nothing ran
            self.line.give_back(conn)
            return self.script(keys=self.keys, args=self.args)
        except BaseException:  # a broken connection, or interrupted mid-answer: never read from it again
            self.line.give_back(conn, broken=True)
            raise
        self.line.give_back(conn)
        return answer


def send(redis, script, keys: list, args: list) -> Pending:
    """Send `script` (a redis-py Script of `redis`) with `keys` and `args` on this thread's connection; its answer
    is read by `Pending.reply()`. Raises redis errors and OSError when it could not be sent."""
    line = line_of(redis)
    conn = line.take(redis.connection_pool)
    if conn is None:  # this thread's connection waits for another answer
        return Pending(redis, script, keys, args)
    try:
        conn.send_packed_command(conn.pack_command("EVALSHA", script.sha, len(keys), *keys, *args))
    except BaseException:
        line.give_back(conn, broken=True)
        raise
    return Pending(redis, script, keys, args, conn, line)
