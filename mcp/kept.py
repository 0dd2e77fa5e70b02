"""What the MCP endpoint keeps between calls, per worker (docs/CACHES.md: what each keeps, its key and what
invalidates it): day lines and get_trip and list_trips answers keyed by every input they are made of, and KEPT, a
read answer given again with no database read while the epochs it was made under read the same.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from flask import current_app

from mcp.answers import list_item, stage_digest, trip_digest
from oauth.kernel.models import User
from trips.core import epochs, i18n
from trips.core.lru import LRU
from trips.core.text import Floored, floored
from trips.models import Stage, Trip
from trips.services import trip_reads as reads
from trips.services.trip_reads import load_day_json


class _Lines(LRU):
    """The digest lines last rendered, per day: a day's line is a pure function of its columns, its trip's start
    date and the reader's language, so a line whose inputs are all unchanged is not rendered again (decoding and
    rendering a day's alerts and weather is most of a get_trip otherwise). The key holds every input, the
    stored JSON texts as their hashes (per process, randomised); the least recently used lines go first."""

    def line(self, trip: Trip, stage: Stage, locale: str) -> dict:
        stored = getattr(stage, "stored_json", None)  # read as text by trips.services.trip_reads.read_trip
        if stored is None:
            return stage_digest(stage, locale)
        key = (stage.id, locale, trip.start_date, stage.position, stage.distance, stage.elevation,
               stage.is_rest_day, stage.start_label, stage.end_label, *(hash(t) for t in stored.values()))
        line = self.get(key)
        if line is None:
            load_day_json(stage)
            line = floored(stage_digest(stage, locale))  # floored once: the answer's floor skips it
            self.put(key, line)
        return line  # shared by the answers that show this day: read, never changed


LINES = _Lines(4096)  # a day's line is small: thousands fit a worker's memory
# The get_trip digests last answered, keyed by the trip, a hash of every stored value a digest is made of
# (trips.services.trip_reads.trip_fingerprint), the reader's language and today's date (isLocked): a read whose key
# is known answers without loading the trip into the ORM or rendering it again; any change, through BTP or behind
# it, makes another key.
DIGESTS = LRU(256)  # a digest's day lines are shared with LINES


def read_trip_digest(actor: User, trip_id: str) -> Floored:
    """get_trip's answer: the trip's fingerprint (one statement on PostgreSQL, two on SQLite) when the trip is as
    last answered, else the read model as well. Raises NotFound alike for an unknown trip and someone else's."""
    trip_id, fingerprint = reads.trip_fingerprint(actor, trip_id)
    key = (trip_id, fingerprint, i18n.current_locale(), datetime.now(timezone.utc).date())
    answer = DIGESTS.get(key)
    if answer is None:
        answer = floored(trip_digest(reads.read_trip(actor, trip_id), line=LINES.line))
        DIGESTS.put(key, answer)
    return answer


PAGES = LRU(256)  # list_trips answers, keyed by everything they show


def list_page(page: dict) -> Floored:
    """list_trips' answer for a page read by trips.services.trip_reads.list_trips. The key is every value the answer is
    made of (each trip's columns shown, its days' distances, its computations' statuses; the total and the paging),
    so an answer given before for the same rows is given again without being built, floored or encoded anew."""
    trips = page["trips"]
    key = (page["total"], page["page"], page["items_per_page"],
           *((t.id, t.title, t.start_date, t.end_date, t.created_at, t.updated_at,
              *map(tuple, t.list_summary)) for t in trips))
    answer = PAGES.get(key)
    if answer is None:
        answer = floored({"member": [list_item(t) for t in trips], "totalItems": page["total"],
                          "page": page["page"], "itemsPerPage": page["items_per_page"]})
        PAGES.put(key, answer)
    return answer


class _Kept:
    """A read answer as last given for one account, one tool and one set of arguments (in one language, on one
    day), with the values its epochs had when they were read, before the reads that made it."""

    __slots__ = ("values", "answer", "until")

    def __init__(self, values: tuple, answer: Floored, until: float):
        self.values, self.answer, self.until = values, answer, until


KEPT = LRU(1024)  # (tool, account, arguments, language, day) -> _Kept; answers shared with DIGESTS and PAGES
MAX_KEPT_ARGUMENTS = 512  # characters: arguments longer than this are not kept (they are refused anyway)


def kept_reads(ctx, arguments) -> tuple:
    """The `reads` of get_trip and list_trips (mcp/tools/base.py Tool.reads): the epochs of every trip and of the
    caller's (trips/core/epochs.py), so an answer neither changed since it was given is given again without reading
    the database. Nothing when the cache is off (BTP_READ_CACHE_S = 0) or the arguments are odd (refused later)."""
    max_age_s = current_app.config.get("BTP_READ_CACHE_S", epochs.DEFAULT_MAX_AGE_S)
    key = _kept_key(ctx, arguments) if max_age_s > 0 else None
    if key is None:
        return ()
    ctx.read_state = (key, max_age_s)
    return epochs.TRIPS_KEY, epochs.user_key(ctx.principal.user_id)


def _kept_key(ctx, arguments) -> tuple | None:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict) or len(repr(arguments)) > MAX_KEPT_ARGUMENTS:
        return None
    if not all(isinstance(v, (str, int, float, bool)) or v is None for v in arguments.values()):
        return None
    # the language and the day: a digest's words and isLocked change with them, no write needed
    return (ctx.tool, ctx.principal.user_id, i18n.current_locale(), datetime.now(timezone.utc).date(),
            *sorted((str(k), type(v).__name__, v) for k, v in arguments.items()))


def kept_answer(ctx, make) -> Floored:
    """A read tool's answer: the one kept for this call while both epochs read the same as when it was kept
    (ctx.read_values, read with the budgets before this), else `make()` (its reads), kept under the values just
    read: read before the database was, so a write committed after them has replaced them."""
    state, values = ctx.read_state, ctx.read_values
    if state is None or values is None:  # the cache off, odd arguments, or Redis could not be asked
        return make()
    key, max_age_s = state
    kept = KEPT.get(key)
    if kept is not None and kept.values == values and kept.until > time.monotonic():
        return kept.answer
    answer = make()
    KEPT.put(key, _Kept(values, answer, time.monotonic() + max_age_s))
    return answer


