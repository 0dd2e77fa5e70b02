"""Epochs: random values in Redis, replaced after every committed write to what they stand for, so a process may
give again an answer it kept under an epoch while the epoch reads the same. The token epoch stands for tokens and
accounts; the trips epochs for one account's trips, days and computations, or for every trip's. Which writes
replace which epoch, and why a change shows at once everywhere: docs/CACHES.md "Epochs".
"""
from __future__ import annotations

import contextvars
import re
import threading
import time
import uuid
from contextlib import contextmanager

import redis as redis_lib
from flask_sqlalchemy.session import Session as FlaskSession
from flask import current_app, has_app_context
from sqlalchemy import event, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm.util import identity_key

from trips.core import redisline
from trips.core.redis_client import get_redis

TOKEN_KEY = "btp:token-epoch"
TRIPS_KEY = "btp:trips-epoch"
DEFAULT_MAX_AGE_S = 60.0
READ_KEY_TTL_S = 86400  # an epoch key created by its reader lives this long unless written again

# Part of the budgets' script (trips/core/ratelimit.py `reads`, which defines nread, sets and member): a missing key
# takes the call's random member, so it never reads as a value it had before.
READ_KEYS_LUA = """
local values = {}
if nread > 0 then
  values = redis.call('MGET', unpack(KEYS, sets + 1))
  for j = 1, nread do
    if not values[j] then
      values[j] = member
      redis.call('SET', KEYS[sets + j], member, 'EX', ARGV[2 * sets + 3])
    end
  end
end
"""


def user_key(user_id: str | None) -> str:
    """The epoch of an account's trips; every trip's when the owner is not known."""
    return f"{TRIPS_KEY}:u:{user_id}" if user_id else TRIPS_KEY


def new_epoch() -> str:
    return uuid.uuid4().hex


# --- which statements write what ------------------------------------------------------------------------------------
_WRITES = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(access_token|user_account|trip|stage|computation)"?'
                     r'(?=[\s(]|$)', re.IGNORECASE)
_AUTH, _TRIPS, _NONE = "auth", "trips", ""
_SEEN: dict[str, str] = {}
_WRITTEN = "btp_epochs_written"  # on the connection's pool record: the keys to replace once it is back in the pool
_TELL = "btp_epochs_redis"  # and the Redis to tell (known while the app is: the pool may take it back after)
_attributed = contextvars.ContextVar("btp_trip_writes_attributed", default=False)
_local_resets: dict[str, list] = {}  # key -> callables run in this process when a write replaces it


def on_replaced(key: str, reset) -> None:
    """Run `reset()` in this process whenever one of its own writes replaces `key` (after the commit)."""
    _local_resets.setdefault(key, []).append(reset)


def _family(statement: str) -> str:
    known = _SEEN.get(statement)
    if known is None:
        match = _WRITES.match(statement)
        known = _NONE
        if match:
            verb, table = match.group(1)[0].upper(), match.group(2).lower()
            if table in ("access_token", "user_account"):
                known = _AUTH if verb != "I" else _NONE  # issuing a token changes nothing a kept answer says
            else:
                known = _TRIPS
        if len(_SEEN) < 4096:
            _SEEN[statement] = known
    return known


@event.listens_for(Engine, "before_cursor_execute")
def _note_statement(conn, cursor, statement, parameters, context, executemany):
    if statement[:1] not in "IiUuDd \n":
        return
    family = _family(statement)
    if family == _AUTH:
        _written(conn.info).add(TOKEN_KEY)
    elif family == _TRIPS and not _attributed.get():
        _written(conn.info).add(TRIPS_KEY)


def _written(info: dict) -> set:
    keys = info.get(_WRITTEN)
    if keys is None:
        keys = info[_WRITTEN] = set()
        info[_TELL] = _redis_of_app()
    return keys


class TrackedSession(FlaskSession):
    """The app's session: a flush says whose trips it writes (their owners' epochs), so those writes replace only
    the epochs they change. A model whose rows a list page shows names its trip (`_epoch_trip`: the attribute
    holding the trip's id) or its owner (`_epoch_owner`)."""

    def flush(self, objects=None) -> None:
        if self._is_clean():
            return super().flush(objects)
        watched = [o for o in (*self.new, *self.dirty, *self.deleted)
                   if hasattr(o, "_epoch_trip") or hasattr(o, "_epoch_owner")]
        token = _attributed.set(True)
        try:
            super().flush(objects)
        finally:
            _attributed.reset(token)
        if watched:  # after the flush: new rows have their ids and foreign keys now
            owners = {}  # trip id -> owner, from the trips this flush wrote (a deleted one can no longer be read)
            for obj in watched:
                if hasattr(obj, "_epoch_owner"):
                    identity = sa_inspect(obj).identity
                    trip_id = identity[0] if identity else obj.__dict__.get("id")
                    owners[trip_id] = obj.__dict__.get(obj._epoch_owner) or owner_of(self, trip_id)
            keys = _written(self.connection().info)
            keys.update(user_key(owner) for owner in owners.values())
            for obj in watched:
                if not hasattr(obj, "_epoch_owner"):
                    trip_id = obj.__dict__.get(obj._epoch_trip)  # None when expired: every trip's epoch
                    keys.add(user_key(owners[trip_id] if trip_id in owners else owner_of(self, trip_id)))


_OWNED: list = []  # the one mapped class whose rows name their account (`owned`: trips/models.py Trip)


def owned(cls):
    """Class decorator: `cls` is the trip, whose `_epoch_owner` attribute holds its account; the rows of other
    watched models name their trip (`_epoch_trip`), and `owner_of` reads the owner through this class."""
    _OWNED[:] = [cls]
    return cls


def owner_of(session, trip_id: str | None) -> str | None:
    """The account owning a trip: from the session's identity map when the trip is there (no query), else read."""
    if not trip_id:
        return None
    trip_class = _OWNED[0]
    owner_column = trip_class._epoch_owner
    trip = session.identity_map.get(identity_key(trip_class, trip_id))
    owner = trip.__dict__.get(owner_column) if trip is not None else None  # never a load of an expired attribute
    if owner is None:
        owner = session.connection().execute(
            select(getattr(trip_class, owner_column)).where(trip_class.id == trip_id)).scalar()
    return owner


def written_by_hand(info: dict, owner_id: str) -> None:
    """A statement run on a pooled DBAPI connection outside SQLAlchemy (no cursor event sees it; `info`: the
    connection's pool record, `raw_connection().info`) wrote trips of `owner_id`: their epoch is replaced once that
    connection is back in the pool, after its commit."""
    _written(info).add(user_key(owner_id))


@contextmanager
def writing_owned(session, owner_id: str):
    """Statements written by hand inside change only trips of `owner_id` (their epoch): for a statement whose own
    WHERE names the owner, so no read is needed to know whose trip it writes. The epoch is noted only when the block
    ends without raising: a conditional write that matched nothing and raised to roll back replaces no epoch."""
    token = _attributed.set(True)
    try:
        yield
    finally:
        _attributed.reset(token)
    _written(session.connection().info).add(user_key(owner_id))


@contextmanager
def writing_trip(session, trip_id: str):
    """Statements written by hand inside change only this trip's days or computations (its owner's epoch)."""
    _written(session.connection().info).add(user_key(owner_of(session, trip_id)))
    token = _attributed.set(True)
    try:
        yield
    finally:
        _attributed.reset(token)


# --- replacing the epochs after the commit ------------------------------------------------------------------------
def _redis_of_app() -> tuple:
    """(the app's Redis client or False, the longest any of its processes keeps an answer under an epoch)."""
    if not has_app_context():
        return False, 0.0  # no app, no Redis to tell (answers are kept in app requests only)
    config = current_app.config
    max_age_s = max(float(config.get("BTP_TOKEN_CACHE_S", DEFAULT_MAX_AGE_S)),
                    float(config.get("BTP_READ_CACHE_S", DEFAULT_MAX_AGE_S)))
    try:
        return get_redis() or False, max_age_s
    except Exception:  # no Redis configured
        return False, max_age_s


@event.listens_for(Engine, "checkin")
def _after_checkin(dbapi_connection, record):
    # After the commit, never before: no reader may keep an answer under a new epoch while the database still shows
    # the old rows. After a rollback the new epochs are needless and only cost answers made again.
    keys = record.info.pop(_WRITTEN, None)
    redis, max_age_s = record.info.pop(_TELL, (False, 0.0))
    if not keys:
        return
    for key in keys:
        for reset in _local_resets.get(key, ()):
            reset()
    if redis is False:
        return
    sent = _send_replace(redis, keys)
    deferred = _deferred.get()
    if sent is not None and deferred is not None:  # a request: its answer is read as the request ends
        deferred.append((redis, keys, max_age_s, sent))
    elif not _replaced(sent):
        _retry_later(redis, keys, max_age_s)


# In a request, the replacements' answers are read as it ends (`settle`, before the server has the answer), so Redis
# works while the request builds its answer; a job or the CLI reads each at once.
_deferred: contextvars.ContextVar[list | None] = contextvars.ContextVar("btp_epochs_deferred", default=None)


def defer() -> None:
    """A request starts (a before_request hook): its replacements are read by `settle`."""
    _deferred.set([])


def settle(_exc=None) -> None:
    """A request ends (a teardown_request hook, also after an error): read what its writes replaced; one not
    written is retried as any (`_retry_later`)."""
    pending = _deferred.get()
    if pending is None:
        return
    _deferred.set(None)
    for redis, keys, max_age_s, sent in pending:
        if not _replaced(sent):
            _retry_later(redis, keys, max_age_s)


def init_app(app) -> None:
    app.before_request_funcs.setdefault(None, []).insert(0, defer)
    app.teardown_request(settle)


# KEYS = the epochs to replace, ARGV = their new values, then the expiry in seconds: one script, sent on the writing
# thread's own connection (trips/core/redisline.py: no pooled connection taken and given back, no pipeline object).
_REPLACE_LUA = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'EX', ARGV[#KEYS + 1]) end return #KEYS"
_REPLACE_ATTR = "_btp_epochs_replace_script"


def _send_replace(redis, keys):
    """The replacement of `keys` sent (a redisline.Pending), or None when it could not be sent."""
    keys = list(keys)
    try:
        script = getattr(redis, _REPLACE_ATTR, None)
        if script is None:
            script = redis.register_script(_REPLACE_LUA)
            setattr(redis, _REPLACE_ATTR, script)
        return redisline.send(redis, script, keys, [*(new_epoch() for _ in keys), READ_KEY_TTL_S])
    except (redis_lib.RedisError, OSError):
        return None


def _replaced(sent) -> bool:
    """True once the replacement `sent` is written (its answer read, exactly once)."""
    if sent is None:
        return False
    try:
        sent.reply()
        return True
    except (redis_lib.RedisError, OSError):
        return False


def _replace(redis, keys) -> bool:
    return _replaced(_send_replace(redis, keys))


_retry: dict = {}  # Redis client -> (keys not replaced yet, until when to try: time.monotonic())
_retry_lock = threading.Lock()
_retrier: threading.Thread | None = None


def _retry_later(redis, keys, max_age_s: float) -> None:
    """Try again every half second until it works, or until no process can still believe an answer it kept before
    the write (max_age_s from now): then the new epochs no longer matter."""
    global _retrier
    with _retry_lock:
        waiting, until = _retry.get(redis, (set(), 0.0))
        _retry[redis] = (waiting | set(keys), max(until, time.monotonic() + max_age_s))
        if _retrier is None or not _retrier.is_alive():
            _retrier = threading.Thread(target=_retry_loop, args=(_retry,), name="epochs", daemon=True)
            _retrier.start()


def _retry_loop(waiting: dict) -> None:
    while True:
        time.sleep(0.5)
        with _retry_lock:
            pending = list(waiting.items())
        for redis, entry in pending:
            keys, until = entry
            if _replace(redis, keys) or time.monotonic() > until:
                with _retry_lock:
                    if waiting.get(redis) is entry:
                        del waiting[redis]
        with _retry_lock:
            if not waiting:
                return
