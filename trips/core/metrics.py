"""Counters and histograms for /metrics, kept in Redis (requests, tool calls, job durations): every gunicorn worker,
RQ work horse and host adds to the same totals, which in-process counters cannot give. Observations fail open: with
Redis unreachable nothing is recorded through that client for PAUSE_S (one warning), so an outage never slows a
request down by its timeouts.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import threading
import time
from bisect import bisect_left
from functools import wraps

import redis as redis_lib
from flask import g, has_request_context

from trips.core.redis_client import get_redis

log = logging.getLogger(__name__)

PREFIX = "btp:metrics"
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
JOB_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_CODE = re.compile(r"[a-z][a-z0-9_]{0,39}")
PAUSE_S = 30.0
_PAUSED = "_btp_metrics_paused_until"  # kept on the client: each app (and the worker) has its own

# name -> (type, help, label names, buckets: none for a counter)
METRICS: dict[str, tuple[str, str, tuple[str, ...], tuple[float, ...]]] = {
    "btp_http_requests_total": ("counter", "HTTP requests by route rule, method and status.",
                                ("method", "route", "status"), ()),
    "btp_http_request_duration_seconds": ("histogram", "Time to the response headers, by route rule and method.",
                                          ("method", "route"), HTTP_BUCKETS),
    "btp_tool_calls_total": ("counter", "MCP tool calls by tool and outcome (ok, the refusal code, "
                             "input_required, or error).", ("tool", "outcome"), ()),
    "btp_job_duration_seconds": ("histogram", "RQ job durations by kind (the job function) and outcome.",
                                 ("kind", "outcome"), JOB_BUCKETS),
}


def _key(name: str) -> str:
    return f"{PREFIX}:{name}"


_LAST_TRIP = "_btp_last_round_trip"  # on flask.g: what waits for the request's last round trip


def _record(redis, *ops, joined=()) -> None:
    """Apply (command, metric, field, amount) operations in one pipelined round trip, with the `joined`
    (build, then) commands of `join_last_round_trip`; never raises."""
    if redis is None or time.monotonic() < getattr(redis, _PAUSED, 0.0):
        return
    try:
        pipe = redis.pipeline(transaction=False)
        for command, name, field, amount in ops:
            getattr(pipe, command)(_key(name), field, amount)
        for build, _ in joined:
            build(pipe)
        results = pipe.execute()
    except (redis_lib.RedisError, OSError) as exc:
        setattr(redis, _PAUSED, time.monotonic() + PAUSE_S)
        log.warning("metrics not recorded for %.0f s: Redis unavailable: %s", PAUSE_S, exc)
        return
    for (_, then), result in zip(joined, results[len(ops):]):
        then(result)


def _waiting() -> dict | None:
    """What waits for this request's last round trip (its metrics, record_request), or None outside a request."""
    if not has_request_context():
        return None
    waiting = g.get(_LAST_TRIP)
    if waiting is None:
        waiting = {"ops": [], "joined": []}
        setattr(g, _LAST_TRIP, waiting)
    return waiting


def join_last_round_trip(build, then) -> bool:
    """In a request: `build(pipeline)` adds one command to the round trip that records the request's metrics
    after its view (record_request), and `then(result)` runs with its result once it answered (not at all when
    Redis could not be reached). Returns False outside a request, where the caller sends its command itself."""
    waiting = _waiting()
    if waiting is None:
        return False
    waiting["joined"].append((build, then))
    return True


_FIELDS: dict[tuple, str] = {}  # label values -> their hash field: a small set (routes, methods, statuses, tools)


def _field(*parts) -> str:
    field = _FIELDS.get(parts)
    if field is None:
        field = json.dumps(parts, separators=(",", ":"))
        if len(_FIELDS) >= 4096:  # label values are bounded, yet never hold more than this
            _FIELDS.clear()
        _FIELDS[parts] = field
    return field


def _observe(name: str, labels: tuple, value: float) -> list[tuple]:
    bucket = bisect_left(METRICS[name][3], value)  # the first bound >= value; len(...) means +Inf
    return [("hincrby", name, _field(*labels, "b", bucket), 1),
            ("hincrbyfloat", name, _field(*labels, "sum"), value)]


def record_request(redis, method: str, route: str, status: int, seconds: float, defer_s: float = 0.0) -> None:
    """The request's counters, with everything that waited for its last round trip (tool calls, joined
    commands): one round trip a request, or with `defer_s` > 0 (a served web worker) none for most requests:
    the counters are summed in process and sent at most `defer_s` later (`_Pending`)."""
    method = method if method in METHODS else "OTHER"  # the method is the client's: bound the label values
    waiting = _waiting()
    if waiting is not None:
        g.pop(_LAST_TRIP, None)
    waiting = waiting or {"ops": [], "joined": []}
    ops = [("hincrby", "btp_http_requests_total", _field(method, route, str(status)), 1),
           *_observe("btp_http_request_duration_seconds", (method, route), seconds), *waiting["ops"]]
    if defer_s > 0 and redis is not None:
        ops = _pending(redis).add(ops, defer_s, now=bool(waiting["joined"]))
        if not ops and not waiting["joined"]:
            return
    _record(redis, *ops, joined=waiting["joined"])


class _Pending:
    """A served worker's request counters not sent yet, summed per field: they go with the first request that has
    a round trip to make anyway (a joined command), with the first one `defer_s` after the oldest, or from a
    daemon thread for a worker that went quiet, so Redis sees them at most about `defer_s` late. A worker killed
    loses at most its last `defer_s` of counts; one that exits normally sends them (atexit)."""

    def __init__(self, redis):
        self.redis, self.lock, self.sums, self.since = redis, threading.Lock(), {}, None
        self.every, self.thread_pid = 1.0, None

    def add(self, ops, defer_s: float, now: bool = False) -> list[tuple]:
        """Add `ops`; returns the operations to send now (all that is pending) or [] to wait."""
        with self.lock:
            for command, name, field, amount in ops:
                key = (command, name, field)
                self.sums[key] = self.sums.get(key, 0) + amount
            clock = time.monotonic()
            self.since = self.since or clock
            self.every = defer_s
            if not now and clock - self.since < defer_s:
                self._watch()
                return []
            return self._take()

    def _take(self) -> list[tuple]:
        taken = [(command, name, field, amount) for (command, name, field), amount in self.sums.items()]
        self.sums, self.since = {}, None
        return taken

    def flush(self) -> None:
        with self.lock:
            taken = self._take()
        if taken:
            _record(self.redis, *taken)

    def _watch(self) -> None:
        if self.thread_pid != os.getpid():  # first use in this process (a fork starts without the thread)
            self.thread_pid = os.getpid()
            threading.Thread(target=self._run, name="btp-metrics", daemon=True).start()
            atexit.register(self.flush)

    def _run(self) -> None:
        while True:
            time.sleep(self.every)
            with self.lock:
                due = self.since is not None and time.monotonic() - self.since >= self.every
                taken = self._take() if due else []
            if taken:
                _record(self.redis, *taken)


_PENDING: dict[int, _Pending] = {}
_PENDING_MADE = threading.Lock()  # one per client, whichever of a worker's threads asks first


def _pending(redis) -> _Pending:
    pending = _PENDING.get(id(redis))
    if pending is None or pending.redis is not redis:
        with _PENDING_MADE:
            pending = _PENDING.get(id(redis))
            if pending is None or pending.redis is not redis:
                pending = _PENDING[id(redis)] = _Pending(redis)
    return pending


def flush_pending(redis) -> None:
    """Send this process's deferred counters for `redis` now (before a scrape reads them)."""
    pending = _PENDING.get(id(redis))
    if pending is not None and pending.redis is redis:
        pending.flush()


def record_tool_call(redis, tool: str, outcome: str) -> None:
    """Count a tool call: in a request, with the request's own counters (record_request); else at once."""
    op = ("hincrby", "btp_tool_calls_total", _field(tool, outcome), 1)
    waiting = _waiting()
    if waiting is not None:
        waiting["ops"].append(op)
        return
    _record(redis, op)


def record_job(redis, kind: str, outcome: str, seconds: float) -> None:
    _record(redis, *_observe("btp_job_duration_seconds", (kind, outcome), seconds))


def tool_outcome(result: dict) -> str:
    """ok, input_required, or the refusal's code (read from the refusal JSON of the text block); "refused" when
    that code cannot be read."""
    if result.get("resultType") == "input_required":
        return "input_required"
    if not result.get("isError"):
        return "ok"
    try:
        code = json.loads(result["content"][0]["text"])["error"]["code"]
    except (KeyError, IndexError, TypeError, ValueError):
        return "refused"
    return code if isinstance(code, str) and _CODE.fullmatch(code) else "refused"


def counted_tool_calls(known):
    """Decorate the dispatcher's tools_call(message, ex): count each call by tool and outcome.

    A name outside `known` counts as tool "unknown" (the label values stay a bounded set); a JSON-RPC error
    (unknown tool, missing scope) counts as its data's error or "rpc_error"; an unexpected exception as "error",
    re-raised unchanged."""
    def decorator(tools_call):
        @wraps(tools_call)
        def wrapped(message, ex):
            name = message.params.get("name")
            tool = name if isinstance(name, str) and name in known else "unknown"
            try:
                result = tools_call(message, ex)
            except Exception as exc:
                if getattr(exc, "uncounted", False):  # not a call's outcome (the address over its limit)
                    raise
                data = getattr(exc, "data", None)
                outcome = "error"
                if hasattr(exc, "code") and hasattr(exc, "http_status"):  # an RpcError: a refusal, not a fault
                    code = str(data.get("error")) if isinstance(data, dict) else ""
                    outcome = code if _CODE.fullmatch(code) else "rpc_error"
                record_tool_call(get_redis(), tool, outcome)
                raise
            record_tool_call(get_redis(), tool, tool_outcome(result))
            return result

        return wrapped

    return decorator


def _escape(value: str) -> str:
    # Prometheus text format: backslash, double quote and line feed are escaped in label values.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names, values, extra: str = "") -> str:
    pairs = [f'{n}="{_escape(str(v))}"' for n, v in zip(names, values)]
    return "{" + ",".join(pairs + ([extra] if extra else [])) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render(redis) -> list[str]:
    """The exposition lines of every metric above (types and help even when nothing was observed yet)."""
    flush_pending(redis)  # this worker's own are current; the other workers' are at most their defer_s late
    pipe = redis.pipeline(transaction=False)
    for name in METRICS:
        pipe.hgetall(_key(name))
    lines = []
    for (name, (kind, help_text, label_names, buckets)), raw in zip(METRICS.items(), pipe.execute()):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        fields = sorted((json.loads(f), float(v)) for f, v in raw.items())
        if kind == "counter":
            lines += [f"{name}{_labels(label_names, parts)} {_number(v)}" for parts, v in fields]
            continue
        series: dict[tuple, dict] = {}
        for parts, value in fields:
            n = len(label_names)
            entry = series.setdefault(tuple(parts[:n]), {"b": [0] * (len(buckets) + 1), "sum": 0.0})
            if parts[n] == "b":
                entry["b"][int(parts[n + 1])] += int(value)
            else:
                entry["sum"] = value
        for values, entry in sorted(series.items()):
            total = 0
            for bound, count in zip([*map(repr, buckets), "+Inf"], entry["b"]):
                total += count
                le = f'le="{bound}"'
                lines.append(f"{name}_bucket{_labels(label_names, values, le)} {total}")
            lines.append(f"{name}_sum{_labels(label_names, values)} {_number(entry['sum'])}")
            lines.append(f"{name}_count{_labels(label_names, values)} {total}")
    return lines
