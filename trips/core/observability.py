"""JSON logs, one access line per request, and a request id that follows the request into its jobs: the caller's
`X-Request-Id` when sane (nginx's `$request_id` is), else a new one, echoed in the answer, carried in the meta of
every job the request enqueues and set again while a worker runs that job. The access line names the route rule,
never the path or query: they carry share codes and place searches.
"""
from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
import time
from datetime import datetime, timezone

from flask import Flask, current_app, g, request
from rq.job import Job

from trips.core import metrics
from trips.core.redis_client import get_redis

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("btp_request_id", default=None)
HEADER = "X-Request-Id"
_SANE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
access_log = logging.getLogger("btp.access")
job_log = logging.getLogger("btp.jobs")


def current_request_id() -> str | None:
    return REQUEST_ID.get()


def request_id_from(header: str | None) -> str:
    """The incoming id when sane, else a fresh one (32 hex digits)."""
    if header is not None and _SANE_ID.fullmatch(header):
        return header
    return os.urandom(16).hex()


class JsonFormatter(logging.Formatter):
    """One JSON object per record; `record.fields` (a dict) is merged in, the traceback goes under `exc`."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            line["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of the record (as logging's last-resort handler does), not
    the one of the moment the app was made: a test runner that swaps sys.stderr keeps getting the lines."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr from the root logger, once per process. A root handler that already formats JSON
    (gunicorn.conf.py's logconfig_dict) is kept as it is; other handlers (pytest's capture) are left alone."""
    root = logging.getLogger()
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        handler = _Stderr()
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)  # a line per plugin at every start


def _user_id(here) -> str | None:
    principal = getattr(here, "principal", None)  # bearer callers: REST (require_api_scope) and /mcp; here = g
    if principal is not None:
        user_id = getattr(principal, "user_id", None)  # as read with the token (no read after a commit)
        return str(user_id) if user_id is not None else None
    # A page that read its signed-in account (oauth/services/session.py notes it on `g`): Flask marks a session
    # read as soon as its proxy is touched, which would add Vary: Cookie to every answer.
    user_id = getattr(here, "session_user_id", None)
    return str(user_id) if user_id is not None else None


def _begin_request() -> None:
    started = time.perf_counter()
    request_id = request_id_from(request.headers.get(HEADER))
    here = g._get_current_object()  # one lookup through the proxy, not one per attribute
    here.request_started, here.request_id, here.request_id_token = started, request_id, REQUEST_ID.set(request_id)


def _end_request(response):
    here, status = g._get_current_object(), response.status_code
    seconds = time.perf_counter() - getattr(here, "request_started", time.perf_counter())
    req = request._get_current_object()  # type: ignore[attr-defined]  # Flask types its proxies as their objects
    method, rule = req.method, req.url_rule
    route = rule.rule if rule is not None else "<unmatched>"
    response.headers[HEADER] = getattr(here, "request_id", None) or request_id_from(None)
    access_log.info("%s %s %s", method, route, status, extra={"fields": {
        "method": method, "route": route, "status": status, "duration_ms": round(seconds * 1000, 1),
        "user_id": _user_id(here),
    }})
    metrics.record_request(get_redis(), method, route, status, seconds,
                           current_app.config.get("BTP_METRICS_DEFER_S", 0.0))
    return response


def _forget_request_id(_exc=None) -> None:
    token = g.pop("request_id_token", None)
    if token is not None:
        REQUEST_ID.reset(token)


def init_app(app: Flask) -> None:
    """Register the request hooks first, so the access line sees the final answer of every other hook."""
    app.before_request_funcs.setdefault(None, []).insert(0, _begin_request)
    app.after_request(_end_request)  # after_request runs in reverse order: this one runs last
    app.teardown_request(_forget_request_id)


class ObservedJob(Job):
    """An RQ job that runs under the request id of the request that enqueued it, logs its start and end as
    JSON lines and records its duration by kind (the job function's name). Used by `flask worker`."""

    def perform(self):
        kind = (self.func_name or "?").rsplit(".", 1)[-1]
        token = REQUEST_ID.set((self.meta or {}).get("request_id"))
        started, outcome = time.perf_counter(), "failed"
        job_log.info("job %s started", kind, extra={"fields": {"job": kind, "job_id": self.id}})
        try:
            result = super().perform()
            outcome = "ok"
            return result
        finally:
            seconds = time.perf_counter() - started
            job_log.info("job %s %s", kind, outcome, extra={"fields": {
                "job": kind, "job_id": self.id, "outcome": outcome, "duration_ms": round(seconds * 1000, 1)}})
            metrics.record_job(self.connection, kind, outcome, seconds)
            REQUEST_ID.reset(token)


def job_meta() -> dict | None:
    """The meta a job enqueued now carries: the current request id (in a request, or in a job)."""
    request_id = REQUEST_ID.get()
    return {"request_id": request_id} if request_id else None


__all__ = ["HEADER", "JsonFormatter", "ObservedJob", "configure_logging", "current_request_id", "init_app",
           "job_meta", "request_id_from"]
