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
import weakref
from contextlib import contextmanager

import redis as redis_lib
from flask_sqlalchemy.session import Session as FlaskSession
from flask import current_app, has_app_context
from sqlalchemy import event, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm.util import identity_key

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
    the epochs they change. A model whose rows a list page shows names its trip (`epoch_trip`: the attribute
    holding the trip's id) or its owner (`epoch_owner`)."""

    def flush(self, objects=None) -> None:
        if self._is_clean():
            return super().flush(objects)
        watched = [o for o in (*self.new, *self.dirty, *self.deleted)
                   if hasattr(o, "epoch_trip") or hasattr(o, "epoch_owner")]
        token = _attributed.set(True)
        try:
            super().flush(objects)
        finally:
            _attributed.reset(token)
        if watched:  # after the flush: new rows have their ids and foreign keys now
            owners = {}  # trip id -> owner, from the trips this flush wrote (a deleted one can no longer be read)
            for obj in watched:
                if hasattr(obj, "epoch_owner"):
                    identity = sa_inspect(obj).identity
                    trip_id = identity[0] if identity else obj.__dict__.get("id")
                    owners[trip_id] = obj.__dict__.get(obj.epoch_owner) or owner_of(self, trip_id)
            keys = _written(self.connection().info)
            keys.update(user_key(owner) for owner in owners.values())
            for obj in watched:
                if not hasattr(obj, "epoch_owner"):
                    trip_id = obj.__dict__.get(obj.epoch_trip)  # None when expired: every trip's epoch
                    keys.add(user_key(owners[trip_id] if trip_id in owners else owner_of(self, trip_id)))


_OWNED: list = []  # the one mapped class whose rows name their account (`owned`: trips/models.py Trip)


def owned(cls):
    """Class decorator: `cls` is the trip, whose `epoch_owner` attribute holds its account; the rows of other
    watched models name their trip (`epoch_trip`), and `owner_of` reads the owner through this class."""
    _OWNED[:] = [cls]
    return cls


def owner_of(session, trip_id: str | None) -> str | None:
    """The account owning a trip: from the session's identity map when the trip is there (no query), else read."""
    if not trip_id:
        return None
    trip_class = _OWNED[0]
    owner_column = trip_class.epoch_owner
    trip = session.identity_map.get(identity_key(trip_class, trip_id))
    owner = trip.__dict__.get(owner_column) if trip is not None else None  # never a load of an expired attribute
    if owner is None:
        owner = session.connection().execute(
            select(getattr(trip_class, owner_column)).where(trip_class.id == trip_id)).scalar()
    return owner


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
    if redis is not False and not _replace(redis, keys):
        _retry_later(redis, keys, max_age_s)


# KEYS = the epochs to replace, ARGV = their new values, then the expiry in seconds: all of them in one round trip.
_REPLACE_LUA = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'EX', ARGV[#KEYS + 1]) end return #KEYS"
_scripts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> the script registered with it


def _replace(redis, keys) -> bool:
    """True once `keys` have new epochs; False when Redis could not be told."""
    keys = list(keys)
    try:
        script = _scripts.get(redis)
        if script is None:
            script = _scripts[redis] = redis.register_script(_REPLACE_LUA)
        script(keys=keys, args=[*(new_epoch() for _ in keys), READ_KEY_TTL_S])
        return True
    except (redis_lib.RedisError, OSError):
        return False


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
