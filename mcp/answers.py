"""What the tools answer: compact digests built from the same records as REST, labels cleaned and bounded."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from datetime import datetime, timezone

from flask import current_app

from trips.core import epochs, i18n
from oauth.models import User
from trips.core.text import Floored, floored, label
from trips.enrich import registry
from trips.guards import is_locked
from trips.models import Stage, Trip
from trips.readmodels import day
from trips.readmodels.trip import next_action, partial, settings, trip_list_item
from trips.services import trip_reads as reads
from trips.services.trip_reads import load_day_json

# One line per day: a 30-day digest with alerts, lodgings and the weather word (17 days: the forecast horizon)
# on every day must stay under 12 KB (the full texts are in get_stage): the title at 100 characters, labels
# and names at 16, at most two critical alerts at 60.
DIGEST_TITLE = 100
DIGEST_LABEL = 16
DIGEST_ALERT = 60
DIGEST_CRITICAL = 2  # critical alerts quoted per day; alertCount still counts them all
STAGE_ALERT = 300  # an alert's text in get_stage
STAGE_TEXT = 120  # third-party text beside a place in get_stage (opening hours)
MAX_ACCOMMODATIONS = 5  # at most five candidates per day (docs/RULES.md "Accommodations")
ACTION_KEYS = ("kind", "lat", "lon", "splitAtKm", "maxDistance", "departureHour", "afterStage")


def _iso(value):
    return value.isoformat() if value is not None else None


def price_range(place: dict) -> dict:
    return {"priceMin": place.get("estimatedPriceMin"), "priceMax": place.get("estimatedPriceMax")}


def _euros(place: dict) -> str:
    low, high = place.get("estimatedPriceMin"), place.get("estimatedPriceMax")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        return ""  # no estimate (a place entered by hand)
    return f" · {low:g} €" if low == high else f" · {low:g}–{high:g} €"


def digest_accommodation(stage: Stage) -> str | None:
    """The chosen place to sleep, else "suggested: " and the best candidate, with the price range: one short
    string keeps the line small (the candidates are in get_stage)."""
    place, chosen = day.best_accommodation(stage)
    if place is None:
        return None
    name = label(place.get("name"), DIGEST_LABEL) or "unnamed"
    return ("" if chosen else "suggested: ") + name + _euros(place)


def stage_digest(stage: Stage) -> dict:
    rendered = day.alerts(stage)
    critical = [a["message"] for a in rendered if a["severity"] == "critical"]
    return {
        "stageId": stage.id, "dayNumber": stage.day_number, "distance": round(stage.distance, 1),
        "elevation": round(stage.elevation), "isRestDay": stage.is_rest_day,
        "startLabel": label(stage.start_label, DIGEST_LABEL),
        "endLabel": label(stage.end_label, DIGEST_LABEL), "accommodation": digest_accommodation(stage),
        "alertCount": len(rendered), "criticalAlerts": [label(m, DIGEST_ALERT) for m in critical[:DIGEST_CRITICAL]],
    } | _weather_word(stage)


def _weather_word(stage: Stage) -> dict:
    """{"weather": "rain 12–17°"} for a day with a forecast, else nothing (bytes count in a 30-day digest)."""
    word = day.weather_word(stage.trip, stage)
    return {"weather": word} if word else {}


class _Lines:
    """The digest lines last rendered, per day: a day's line is a pure function of its columns, its trip's start
    date and the reader's language, so a line whose inputs are all unchanged is not rendered again (decoding and
    rendering a day's alerts and weather is most of a get_trip otherwise). The key holds every input, the
    stored JSON texts as their hashes (per process, randomised); the least recently used lines go first."""

    def __init__(self, size: int):
        self.size, self.lines = size, OrderedDict()

    def line(self, trip: Trip, stage: Stage, locale: str) -> dict:
        stored = getattr(stage, "stored_json", None)  # read as text by trips.services.trip_reads.read_trip
        if stored is None:
            return stage_digest(stage)
        key = (stage.id, locale, trip.start_date, stage.position, stage.distance, stage.elevation,
               stage.is_rest_day, stage.start_label, stage.end_label, *(hash(t) for t in stored.values()))
        line = self.lines.get(key)
        if line is None:
            load_day_json(stage)
            line = self.lines[key] = floored(stage_digest(stage))  # floored once: the answer's floor skips it
            if len(self.lines) > self.size:
                self.lines.popitem(last=False)
        else:
            self.lines.move_to_end(key)
        return line  # shared by the answers that show this day: read, never changed


LINES = _Lines(4096)  # ~1 KB a line: a few MB per worker at most


class _Digests:
    """The get_trip digests last answered, per worker, keyed by the trip, a hash of every stored value a digest
    is made of (trips.services.trip_reads.trip_fingerprint), the reader's language and today's date (isLocked): a
    read whose key is known answers without loading the trip into the ORM or rendering it again; any change,
    through BTP or behind it, makes another key. The least recently used go first."""

    def __init__(self, size: int):
        self.size, self.answers, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            answer = self.answers.get(key)
            if answer is not None:
                self.answers.move_to_end(key)
            return answer

    def put(self, key, answer) -> None:
        with self.lock:
            self.answers[key] = answer
            if len(self.answers) > self.size:
                self.answers.popitem(last=False)


DIGESTS = _Digests(256)  # a digest is a few KB, its day lines shared with LINES


def read_trip_digest(actor: User, trip_id: str) -> Floored:
    """get_trip's answer: the trip's fingerprint (one statement on PostgreSQL, two on SQLite) when the trip is as
    last answered, else the read model as well. Raises NotFound alike for an unknown trip and someone else's."""
    trip_id, fingerprint = reads.trip_fingerprint(actor, trip_id)
    key = (trip_id, fingerprint, i18n.current_locale(), datetime.now(timezone.utc).date())
    answer = DIGESTS.get(key)
    if answer is None:
        answer = floored(trip_digest(reads.read_trip(actor, trip_id)))
        DIGESTS.put(key, answer)
    return answer


def trip_digest(trip: Trip) -> dict:
    stages = list(trip.stages)
    values = settings(trip)
    locale = i18n.current_locale()
    return {
        "id": trip.id, "version": trip.version, **values, "title": label(trip.title, DIGEST_TITLE),
        "status": trip.status,
        "partial": partial(trip), "nextAction": next_action(trip),
        "isLocked": is_locked(trip), "outOfZone": trip.out_of_zone,
        "categoryStatus": registry.category_statuses(trip),
        "stageCount": len(stages), "totalDistance": round(sum(s.distance for s in stages if not s.is_rest_day), 1),
        "stages": [LINES.line(trip, s, locale) for s in stages],
    }


def stage_detail(trip: Trip, stage: Stage) -> dict:
    """get_stage: the day read model trimmed for an agent: labels bounded, alerts without their map polylines
    (the REST stage detail carries them), at most five places to sleep with their price range."""
    full = day.stage_detail(trip, stage)
    out = {k: full[k] for k in ("stageId", "dayNumber", "distance", "elevation", "elevationLoss", "startPoint",
                                "endPoint", "isRestDay", "ridingHours", "estimatedArrival", "approximate",
                                "alertCount", "groups", "categoryStatus", "terrain")}
    out.update({key: label(full[key]) for key in ("label", "startLabel", "endLabel")})
    out["alerts"] = [_alert(a) for a in full["alerts"]]
    out["accommodations"] = [_place(p) for p in full["accommodations"][:MAX_ACCOMMODATIONS]]
    out["selectedAccommodation"] = _place(full["selectedAccommodation"])
    out["resupply"] = None if full["resupply"] is None else [_resupply(p) for p in full["resupply"]]
    out["culturalPois"] = None if full["culturalPois"] is None else [_cultural(p) for p in full["culturalPois"]]
    # the day's forecast summary; its hourly slots stay in the REST stage detail
    weather = day.forecast(trip, stage)
    return {**out, "tripVersion": trip.version, "weather": weather,
            "weatherAvailability": day.weather_availability(trip, stage)}


def _alert(alert: dict) -> dict:
    out = {"code": alert["code"], "severity": alert["severity"], "group": alert["group"],
           "message": label(alert["message"], STAGE_ALERT), "action": None}
    action = alert.get("action")
    if action:  # `segments` (polylines for a map) stay in the REST detail
        out["action"] = {k: action[k] for k in ACTION_KEYS if k in action}
    return out


def _place(place: dict | None) -> dict | None:
    """A place to sleep as get_stage shows it (copies: the stored JSON must not change under the ORM)."""
    if not place:
        return None
    return {"name": label(place.get("name")), "type": place.get("type"), "lat": place["lat"], "lon": place["lon"],
            **price_range(place), "isExactPrice": bool(place.get("isExactPrice")),
            "distance": place.get("distanceToEndPoint"), "possibleClosed": bool(place.get("possibleClosed"))}


def _resupply(place: dict) -> dict:
    return {"name": label(place.get("name")), "category": place.get("category"), "km": place.get("km"),
            "openAtPassage": place.get("openAtPassage"),
            "openingHours": label(place.get("openingHours"), STAGE_TEXT)}


def _cultural(place: dict) -> dict:
    return {"name": label(place.get("name")), "type": place.get("type"), "km": place.get("km"),
            "distance": place.get("distance"), "openingHours": label(place.get("openingHours"), STAGE_TEXT)}


def list_item(trip: Trip) -> dict:
    item = trip_list_item(trip)
    item["title"] = label(item["title"])
    return item


PAGES = _Digests(256)  # list_trips answers, keyed by everything they show (a few KB each)


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


KEPT = _Digests(1024)  # (tool, account, arguments, language, day) -> _Kept; answers shared with DIGESTS and PAGES
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


def ack(result: str, version: int | None = None, next_action: str | None = None) -> dict:
    answer = {"result": result, "nextAction": next_action}
    if version is not None:
        answer["version"] = version
    return answer


def impact(trip: Trip, share_url: str | None) -> dict:
    return {"tripId": trip.id, "title": label(trip.title), "stageCount": len(trip.stages),
            "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
            "hasActiveShareLink": share_url is not None, "shareUrl": share_url}
