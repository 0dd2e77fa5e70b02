"""The MCP peer of bench/bench_mcp.py: a FastMCP 4 server a Python team would write for the same three tools.

Runs in its own virtual environment (bench/peers/requirements.txt, never a BTP dependency), under uvicorn:

    PEER_DATABASE_URL=postgresql://... PEER_AUDIENCE=http://127.0.0.1:8000/mcp PEER_CATALOGUE=catalogue.json \
        .cache/bench-peer/bin/uvicorn fastmcp_peer:app --app-dir bench/peers --workers 2 --port 8100

It reads BTP's database on every call with plain SQL (psycopg 3, an async pool per worker) and answers
`get_trip` with the same digest BTP's `get_trip` answers (mcp/answers.py trip_digest), `list_trips` with the
same page and `edit_stages` (action `update` with a `label`: rename a day) with one UPDATE. It imports no BTP
code: the alert catalogue (severity, group order, English template per code), the weather words and the
computation categories are data, exported once by bench_mcp.py to PEER_CATALOGUE and loaded at start (BTP
loads its own catalogues once per process too).

Bearer tokens: a FastMCP TokenVerifier that does what BTP's lookup does, one indexed query on the SHA-256 of the
token in BTP's access_token table (revoked, expired and audience checked), so each call pays one database
round-trip for its token, as BTP's does.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from typing import Any

from babel import Locale
from babel.numbers import parse_pattern
from fastmcp import FastMCP
from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.dependencies import get_access_token
from fastmcp.exceptions import ToolError
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

DATABASE_URL = os.environ["PEER_DATABASE_URL"]
AUDIENCE = os.environ["PEER_AUDIENCE"]
with open(os.environ["PEER_CATALOGUE"], encoding="utf-8") as f:
    CAT = json.load(f)
ALERTS: dict[str, list] = CAT["alerts"]  # code -> [severity, group, English template or its forms [one, other]]
GROUP_RANK = {g: i for i, g in enumerate(CAT["groups"])}
SEVERITY_RANK = {s: i for i, s in enumerate(CAT["severities"])}
CATEGORIES: dict[str, list] = CAT["categories"]
WEATHER_WORDS: dict[str, str] = CAT["weather_words"]  # str(WMO code) -> word
NO_MAP_DATA: str = CAT["no_map_data"]
COUNTERS = frozenset(CAT["counters"])
ACTIVE = ("pending", "running")
EN = Locale.parse("en")
NUMBER = parse_pattern("#,##0.#")  # at most one decimal, grouped (parsed once, not per number)

pool = AsyncConnectionPool(DATABASE_URL, min_size=2, max_size=8, open=False, kwargs={"row_factory": dict_row})


class DatabaseTokens(TokenVerifier):
    """A live bearer token of BTP's access_token table, for this resource."""

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token or len(token) > 200:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT user_id, client_id, scope, expires_at, revoked_at, audience FROM access_token "
                "WHERE token_hash = %s", (digest,))
            row = await cur.fetchone()
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        if row is None or row["revoked_at"] is not None or row["expires_at"] <= now or row["audience"] != AUDIENCE:
            return None
        return AccessToken(token=token, client_id=row["client_id"] or "cli", scopes=row["scope"].split(),
                           subject=row["user_id"], claims={"sub": row["user_id"]})


mcp = FastMCP("btp-peer", auth=DatabaseTokens(base_url=AUDIENCE.rsplit("/mcp", 1)[0]))


def _user() -> str:
    token = get_access_token()
    if token is None:
        raise ToolError("unauthorized")
    return token.claims["sub"]


# --- the text rules of BTP's answers (labels cleaned and cut) --------------------------------------------------
_BREAKS = re.compile("[\t\n\x0b\x0c\r\x1c-\x1e\x85\u2028\u2029]+")
_DROPS = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]+")
_SPACES = re.compile(" {2,}")


def floor(text: str) -> str:
    return _BREAKS.sub(" ", _DROPS.sub("", text))


def label(text: str | None, limit: int = 200) -> str | None:
    if text is None:
        return None
    cleaned = _SPACES.sub(" ", floor(text)).strip()
    if not cleaned:
        return None
    if len(cleaned) <= limit:
        return cleaned
    at = max(cleaned.rfind(" ", 0, limit + 1), cleaned.rfind("-", 0, limit + 1))  # BTP's cut: at a word
    return (cleaned[:at].rstrip(" -") if at >= limit // 2 else cleaned[:limit]) + "…"


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


# --- get_trip --------------------------------------------------------------------------------------------------
def _param(name: str, value):
    if isinstance(value, bool):
        return value
    if name == "country" and isinstance(value, str):
        return EN.territories.get(value.upper(), value)
    if isinstance(value, int) and name in COUNTERS:
        return value
    if isinstance(value, (int, float)):
        return NUMBER.apply(value, EN)
    return value


def _alerts(alerts_by_group: dict, day_number: int) -> tuple[int, list[str]]:
    """(how many alerts the day has, the critical ones' messages in BTP's order)."""
    rendered = []
    for group in sorted(alerts_by_group or {}, key=lambda g: GROUP_RANK.get(g, len(GROUP_RANK))):
        for fact in alerts_by_group[group] or []:
            kind = ALERTS.get(fact.get("code"))
            severity = kind[0] if kind else "nudge"
            rendered.append((SEVERITY_RANK.get(severity, len(SEVERITY_RANK)), kind, fact))
    rendered.sort(key=lambda r: r[0])
    critical = []
    for _, kind, fact in rendered:
        if kind and kind[0] == "critical":
            params = fact.get("params") or {}
            values = {k: _param(k, v) for k, v in params.items()}
            text = kind[2]
            if isinstance(text, list):  # plural forms [one, other]: English's rule, by the fact's count
                text = text[0] if params.get("count") == 1 else text[-1]
            try:
                critical.append(text.format(**values, stage=day_number))
            except (KeyError, IndexError, ValueError):
                critical.append(text)
    return len(rendered), critical


def _accommodation(stage: dict) -> str | None:
    place, chosen = stage["selected_accommodation"], True
    if not place:
        place, chosen = stage["first_accommodation"], False
    if place is None:
        return None
    name = label(place.get("name"), 16) or "unnamed"
    low, high = place.get("estimatedPriceMin"), place.get("estimatedPriceMax")
    euros = ""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        about = "" if place.get("isExactPrice") else "~"  # BTP's rule: an estimate unless the map gave the price
        euros = f" · {about}{low:g} €" if low == high else f" · {about}{low:g}–{high:g} €"
    return ("" if chosen else "suggested: ") + name + euros


def _weather(trip: dict, stage: dict) -> dict:
    stored = stage["weather"]
    if not isinstance(stored, dict) or trip["start_date"] is None:
        return {}
    if stored.get("date") != (trip["start_date"] + dt.timedelta(days=stage["position"])).isoformat():
        return {}
    code = stored.get("weatherCode")
    word = WEATHER_WORDS.get(str(int(code))) if isinstance(code, (int, float)) else None
    word = word or str(stored.get("description") or "unknown")
    low, high = stored.get("tempMin"), stored.get("tempMax")
    temps = f" {low:.0f}–{high:.0f}°" if isinstance(low, (int, float)) and isinstance(high, (int, float)) else ""
    return {"weather": word + temps}


def _categories(computations: list[dict]) -> list[dict]:
    out = []
    for category, names in CATEGORIES.items():
        rows = [c for c in computations if c["name"] in names]
        statuses = [c["status"] for c in rows]
        if not statuses:
            continue
        if any(s in ACTIVE for s in statuses):
            status = "running"
        elif "failed" in statuses and "done" not in statuses:
            status = "failed"
        else:
            status = "done"
        entry = {"category": category, "status": status}
        if status == "failed":
            entry["reason"] = next((c["reason"] for c in rows if c["status"] == "failed" and c["reason"]), None)
        out.append(entry)
    return out


def _sentence(reason: str) -> str:
    reason = reason.strip()
    return reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")


def _next_action(computations: list[dict], partial: bool) -> str | None:
    if partial:
        return "The trip is still being worked out: ask again in a few seconds."
    failed = {c["name"]: c["reason"] for c in computations if c["status"] == "failed"}
    retry = "Call analyze_trip to try again."
    if "route" in failed:
        return (f"The route could not be fetched: {failed['route'] or 'no reason given.'} {retry} If the link is "
                "wrong, create a new trip from the corrected link with create_trip, or have the rider import the "
                "route as a GPX file (POST /api/trips/gpx-upload).")
    if "stages" in failed:
        return f"The days could not be cut: {failed['stages'] or 'no reason given.'} {retry}"
    if failed:
        reasons = {r for r in failed.values() if r}
        if reasons == {NO_MAP_DATA}:
            return ("No map data covers this trip yet, so its days could not be analysed. Once the operator has "
                    "imported a region with `flask osm import`, call analyze_trip.")
        told = " ".join(_sentence(r) for r in sorted(reasons)[:3])
        return f"Some analyses failed ({', '.join(sorted(failed))}). {told} {retry}".replace("  ", " ")
    return None


TRIP_SQL = ("SELECT id, version, title, source_url, source_type, start_date, end_date, fatigue_factor, "
            "elevation_penalty, ebike_mode, departure_hour, max_distance_per_day, average_speed, "
            "enabled_accommodation_types, status, out_of_zone FROM trip WHERE id = %s AND user_id = %s")
# Only what the digest shows leaves the database: the first lodging candidate and the day's forecast, not every
# candidate and every enrichment field (decoding them would slow every call).
STAGES_SQL = ("SELECT id, position, distance, elevation, is_rest_day, start_label, end_label, "
              "accommodations -> 0 AS first_accommodation, selected_accommodation, alerts_by_group, "
              "enrichment -> 'weather' AS weather, enrichment -> 'labels' AS labels "
              "FROM stage WHERE trip_id = %s ORDER BY position")
COMPUTATIONS_SQL = "SELECT name, status, reason FROM computation WHERE trip_id = %s ORDER BY name"


@mcp.tool(annotations={"readOnlyHint": True})
async def get_trip(id: str) -> dict[str, Any]:
    """A trip's settings and one line per day, with the version the edits need."""
    user = _user()
    async with pool.connection() as conn:
        trip = await (await conn.execute(TRIP_SQL, (id.lower(), user))).fetchone()
        if trip is None:
            raise ToolError("Trip not found.")
        stages = await (await conn.execute(STAGES_SQL, (trip["id"],))).fetchall()
        computations = await (await conn.execute(COMPUTATIONS_SQL, (trip["id"],))).fetchall()
    partial = any(c["status"] in ACTIVE for c in computations)
    today = dt.datetime.now(dt.timezone.utc).date()
    days = []
    for s in stages:
        count, critical = _alerts(s["alerts_by_group"], s["position"] + 1)
        mapped = s["labels"] if isinstance(s["labels"], dict) else {}
        days.append({
            "stageId": s["id"], "dayNumber": s["position"] + 1, "distance": round(s["distance"], 1),
            "elevation": None if s["elevation"] is None else round(s["elevation"]), "isRestDay": s["is_rest_day"],
            # BTP's rule: the rider's label, else the map's nearest place (enrichment "labels")
            "startLabel": label(s["start_label"] or mapped.get("start"), 20),
            "endLabel": label(s["end_label"] or mapped.get("end"), 20),
            "accommodation": _accommodation(s), "alertCount": count,
            "criticalAlerts": [label(m, 60) for m in critical[:2]],
        } | _weather(trip, s))
    return {
        "id": trip["id"], "version": trip["version"], "title": label(trip["title"], 100),
        "sourceUrl": trip["source_url"], "sourceType": trip["source_type"],
        "startDate": _iso(trip["start_date"]), "endDate": _iso(trip["end_date"]),
        "fatigueFactor": trip["fatigue_factor"], "elevationPenalty": trip["elevation_penalty"],
        "ebikeMode": trip["ebike_mode"], "departureHour": trip["departure_hour"],
        "maxDistancePerDay": trip["max_distance_per_day"], "averageSpeed": trip["average_speed"],
        "enabledAccommodationTypes": list(trip["enabled_accommodation_types"]),
        "status": trip["status"], "partial": partial, "nextAction": _next_action(computations, partial),
        "isLocked": trip["start_date"] is not None and trip["start_date"] <= today,
        "outOfZone": trip["out_of_zone"], "categoryStatus": _categories(computations),
        "stageCount": len(stages),
        "totalDistance": round(sum(s["distance"] for s in stages if not s["is_rest_day"]), 1),
        "stages": days,
    }


# --- list_trips ------------------------------------------------------------------------------------------------
LIST_SQL = """
SELECT t.id, t.title, t.start_date, t.end_date, t.created_at, t.updated_at,
       coalesce(s.total, 0) AS total, coalesce(s.n, 0) AS n, c.statuses
FROM trip t
LEFT JOIN LATERAL (SELECT sum(distance) AS total, count(*) AS n FROM stage WHERE trip_id = t.id) s ON true
LEFT JOIN LATERAL (SELECT array_agg(status) AS statuses FROM computation WHERE trip_id = t.id) c ON true
WHERE t.user_id = %s ORDER BY t.created_at DESC, t.id DESC LIMIT %s OFFSET %s
"""


def _list_status(statuses: list[str] | None, n: int) -> str:
    statuses = statuses or []
    if not statuses:
        return "analyzed" if n else "draft"
    if any(s in ACTIVE for s in statuses):
        return "analyzing"
    if "done" not in statuses:
        return "failed" if "failed" in statuses else "draft"
    return "analyzed" if n else "draft"


@mcp.tool(annotations={"readOnlyHint": True})
async def list_trips(page: int = 1, itemsPerPage: int = 20) -> dict[str, Any]:
    """The user's trips, newest first, 20 a page (30 at most)."""
    user = _user()
    if page < 1 or itemsPerPage < 1:
        raise ToolError("page and itemsPerPage start at 1.")
    size = min(itemsPerPage, 30)
    async with pool.connection() as conn:
        total = (await (await conn.execute("SELECT count(*) AS n FROM trip WHERE user_id = %s",
                                           (user,))).fetchone())["n"]
        rows = await (await conn.execute(LIST_SQL, (user, size, (page - 1) * size))).fetchall()
    member = [{"id": r["id"], "title": label(r["title"]), "startDate": _iso(r["start_date"]),
               "endDate": _iso(r["end_date"]), "totalDistance": round(float(r["total"]), 1), "stageCount": r["n"],
               "createdAt": r["created_at"].isoformat() + "Z", "updatedAt": r["updated_at"].isoformat() + "Z",
               "status": _list_status(r["statuses"], r["n"])} for r in rows]
    return {"member": member, "totalItems": total, "page": page, "itemsPerPage": size}


# --- edit_stages: rename a day, one UPDATE ---------------------------------------------------------------------
RENAME_SQL = """
UPDATE stage SET label = %s FROM trip
WHERE stage.id = %s AND stage.trip_id = trip.id AND trip.id = %s AND trip.user_id = %s AND trip.version = %s
RETURNING trip.version
"""


@mcp.tool(annotations={"destructiveHint": True})
async def edit_stages(tripId: str, action: str, version: int, stageId: str | None = None,
                      label: str | None = None) -> dict[str, Any]:
    """Rename a day (action update with a label); needs the trip's version, answers it."""
    user = _user()
    if action != "update" or not stageId or label is None:
        raise ToolError("this peer only renames a day: action update, stageId and label")
    async with pool.connection() as conn:
        row = await (await conn.execute(RENAME_SQL, (label.strip() or None, stageId, tripId, user, version))).fetchone()
    if row is None:
        raise ToolError("Trip or day not found, or the version is not the current one.")
    return {"result": "The day has been changed.",
            "nextAction": "Pass the version above to the next edit; no need to read the trip again.",
            "version": row["version"]}


_inner = mcp.http_app(path="/mcp", stateless_http=True, json_response=True)


async def app(scope, receive, send):
    """The FastMCP app, its pool opened with the worker's lifespan."""
    if scope["type"] == "lifespan":
        await pool.open()
    await _inner(scope, receive, send)
