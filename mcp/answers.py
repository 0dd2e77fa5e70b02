"""What the tools answer: compact digests built from the same records as REST, labels cleaned and bounded."""
from __future__ import annotations

from trips.core import i18n
from trips.core.text import label
from trips.errors import Msg, N_
from trips.enrich import corridor as C
from trips.enrich import pois, registry
from trips.guards import is_locked
from trips.models import Stage, Trip
from trips.readmodels import day, ways
from trips.readmodels.budget import trip_budget
from trips.readmodels.trip import (elevation_totals, next_action, partial, routing, settings, total_distance,
                                   trip_list_item)
from trips.route.elevation import rounded
from trips.services.trip_reads import load_day_json

# One line per day: a 30-day digest with alerts, lodgings, the weather word (17 days: the forecast horizon) and
# both ends named on every day must stay under 12 KB (the full texts are in get_stage): the title at 100
# characters, the day's ends at 20 (most place names whole), a lodging's name at 16, at most two critical alerts
# at 60; every cut at a word (trips/core/text.py label).
DIGEST_TITLE = 100
DIGEST_LABEL = 20
DIGEST_NAME = 16
DIGEST_ALERT = 60
NIGHT_COLUMNS = ("accommodations", "selected_accommodation")  # what the budget reads of a day
DIGEST_CRITICAL = 2  # critical alerts quoted per day; alertCount still counts them all
STAGE_ALERT = 300  # an alert's text in get_stage
STAGE_TEXT = 120  # third-party text beside a place in get_stage (opening hours)
MAX_CUES = 25  # get_stage's cues; the rest are on the share page's cue sheet and in the GPX
# get_stage's answer stays within 12 KB (docs/RULES.md "MCP answers"): its cues take what the rest of the day leaves,
# measured on the answer itself (a few bytes kept for the closing of the list they are added to)
STAGE_BYTES = 12 * 1024 - 16
PLACE_NAME = 60  # a place's name in get_stage: food, water, a sight, a bike shop, a station (most whole)
MAX_SHOPS = 4  # bike shops shown in get_stage, evenly spread along the day (the REST detail keeps six)
MAX_ACCOMMODATIONS = 5  # at most five candidates per day (docs/RULES.md "Accommodations")
# a place's contact as the map has it (trips/enrich/accommodations.py _describe): (answer key, stored key, limit); a
# website is whole or left out (a cut address leads nowhere: the REST day has it whole)
PLACE_CONTACT = (("phone", "phone", 40), ("website", "url", 120), ("address", "address", 120))
# An hourly slot of get_stage's weather as a row (its schema's words say the order)
HOURLY = ("hour", "temp", "precipitationProbability", "windSpeed", "weatherCode")
ACTION_KEYS = ("kind", "lat", "lon", "splitAtKm", "maxDistance", "departureHour", "afterStage")


def _iso(value):
    return value.isoformat() if value is not None else None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


price = day.place_price  # {min, max, currency, estimate} or None


def _money(place: dict, locale: str) -> str:
    said = price(place)
    if said is None:
        return ""  # no price: unknown, never a figure in a money it may not be
    about = "~" if said["estimate"] else ""  # an estimate from the type and stars, not the place's own price
    low, high, sign = said["min"], said["max"], i18n.currency(said["currency"], locale)
    return f" · {about}{low:g} {sign}" if low == high else f" · {about}{low:g}–{high:g} {sign}"


PRICE_REASONS = {"no_basis": N_("price.no_basis"), "no_currency": N_("price.no_currency")}


def price_note(place: dict, locale: str) -> str | None:
    """Why a place has no price, in `locale` (docs/RULES.md "Accommodations"), None when it has one or none was
    looked for (a place entered by hand without one)."""
    key = PRICE_REASONS.get(place.get("priceReason"))
    if key is None or price(place) is not None:
        return None
    return i18n.t(key, locale, country=i18n.country(place.get("country"), locale) or "?")


def digest_accommodation(stage: Stage, locale: str) -> str | None:
    """The chosen place to sleep, else "suggested: " and the best candidate, with the price range, in `locale`'s
    words: one short string keeps the line small (the candidates are in get_stage)."""
    place, chosen = day.best_accommodation(stage)
    if place is None:
        return None
    name = label(place.get("name"), DIGEST_NAME) or Msg("mcp.digest.unnamed")
    said = Msg("mcp.digest.chosen", name=name, price=_money(place, locale)) if chosen else \
        Msg("mcp.digest.suggested", name=name, price=_money(place, locale))
    return i18n.say(said, locale)


def stage_digest(stage: Stage, locale: str) -> dict:
    rendered = day.alerts(stage)
    critical = [a["message"] for a in rendered if a["severity"] == "critical"]
    start, end = day.day_labels(stage)  # the rider's labels, else the map's (docs/RULES.md "Day labels")
    return {
        "stageId": stage.id, "dayNumber": stage.day_number, "distance": round(stage.distance, 1),
        "elevation": rounded(stage.elevation), "isRestDay": stage.is_rest_day,
        "startLabel": label(start, DIGEST_LABEL), "endLabel": label(end, DIGEST_LABEL),
        "accommodation": digest_accommodation(stage, locale),
        "alertCount": len(rendered), "criticalAlerts": [label(m, DIGEST_ALERT) for m in critical[:DIGEST_CRITICAL]],
    } | _weather_word(stage)


def day_line(trip: Trip, stage: Stage, locale: str) -> dict:
    """A day's digest line, its stored JSON decoded first when the trip was read as text (trip_reads.read_trip)."""
    if getattr(stage, "stored_json", None) is not None:
        load_day_json(stage)
    return stage_digest(stage, locale)


def _weather_word(stage: Stage) -> dict:
    """{"weather": "rain 12–17°"} for a day with a forecast, else nothing (bytes count in a 30-day digest)."""
    word = day.weather_word(stage.trip, stage)
    return {"weather": word} if word else {}


def trip_digest(trip: Trip, line=None) -> dict:
    """get_trip's answer for `trip`; `line(trip, stage, locale)` gives each day's line (mcp/kept.py LINES keeps
    them; by default each is rendered)."""
    line = line or day_line
    stages = list(trip.stages)
    values = settings(trip)
    locale = i18n.current_locale()
    return {
        "id": trip.id, "version": trip.version, **values, "title": label(trip.title, DIGEST_TITLE),
        "status": trip.status,
        "partial": partial(trip), "nextAction": next_action(trip),
        "isLocked": is_locked(trip), "outOfZone": trip.out_of_zone,
        "categoryStatus": registry.category_statuses(trip),
        "stageCount": len(stages), "totalDistance": total_distance(trip, stages),
        **_climbing(stages), **_routing(trip), "budget": trip_budget(_with_nights(stages)),
        "stages": [line(trip, s, locale) for s in stages],
    }


def _with_nights(stages: list[Stage]) -> list[Stage]:
    """The days with their places to sleep decoded where the trip was read as text (trip_reads.read_trip): only
    those two columns, as a kept day line spares the rest."""
    for stage in stages:
        if getattr(stage, "stored_json", None) is not None:
            load_day_json(stage, NIGHT_COLUMNS)
    return stages


def _routing(trip: Trip) -> dict:
    """{"routing": legs} for a trip planned from places (trips/readmodels/trip.py routing), else nothing."""
    legs = routing(trip)
    return {"routing": legs} if legs is not None else {}


def _climbing(stages) -> dict:
    """{"elevationReason": why} when a riding day's climbing is unknown (its line's `elevation` is then null),
    else nothing: bytes count in a 30-day digest, and tools/list in its budget (docs/RULES.md "Elevation")."""
    reason = elevation_totals(stages)["elevationReason"]
    return {"elevationReason": reason} if reason else {}


def stage_detail(trip: Trip, stage: Stage) -> dict:
    """get_stage: the day read model trimmed for an agent: labels bounded, alerts without their map polylines
    (the REST stage detail carries them), at most five places to sleep with their price, the day's bike shops and
    train stations, the forecast with its hours as rows."""
    full = day.stage_detail(trip, stage)
    out = {k: full[k] for k in ("stageId", "dayNumber", "distance", "elevation", "elevationLoss", "startPoint",
                                "endPoint", "isRestDay", "ridingHours", "estimatedArrival", "approximate",
                                "alertCount", "groups", "mapCoverage", "categoryStatus", "terrain")}
    out["ways"] = {"surfaces": ways.compact_km(full["surfaces"]), "wayTypes": ways.compact_km(full["wayTypes"]),
                   "cues": None, "reason": full["waysReason"]}
    out.update({key: label(full[key]) for key in ("label", "startLabel", "endLabel")})
    # one key for both (tools/list's budget): the samples and the climbs, null together when the elevation is unknown
    out["profile"] = None if full["profile"] is None else {"samples": full["profile"], "climbs": full["climbs"]}
    if full["elevationReason"]:  # only when the climbing is unknown (docs/RULES.md "Elevation")
        out["elevationReason"] = full["elevationReason"]
    if isinstance(out["terrain"], dict) and "elevationReason" in out["terrain"]:  # said once, beside the day's
        out["terrain"] = {k: v for k, v in out["terrain"].items() if k != "elevationReason"}
    out["alerts"] = [_alert(a) for a in full["alerts"]]
    out["accommodations"] = [_place(p) for p in full["accommodations"][:MAX_ACCOMMODATIONS]]
    out["selectedAccommodation"] = _place(full["selectedAccommodation"])
    out["resupply"] = None if full["resupply"] is None else [_resupply(p) for p in sorted(
        full["resupply"], key=lambda p: (pois.rank(p.get("category")), _km(p)))]  # groceries first
    out["supplyTimeline"] = _timeline(full["supplyTimeline"], i18n.current_locale())
    out["waterPoints"] = None if full["waterPoints"] is None else [_water(p) for p in full["waterPoints"]]
    out["culturalPois"] = None if full["culturalPois"] is None else [_cultural(p) for p in full["culturalPois"]]
    out["bikeShops"] = None if full["bikeShops"] is None else [_shop(p) for p in C.spread(full["bikeShops"],
                                                                                             MAX_SHOPS)]
    out["railwayStations"] = None if full["railwayStations"] is None else [
        {"end": p.get("end"), "name": label(p.get("name"), PLACE_NAME), "distance": p.get("distance")}
        for p in full["railwayStations"]]
    # the day's forecast summary, its hourly slots as rows (the REST stage detail has them whole)
    weather = day.forecast(trip, stage, hourly=True)
    if weather is not None:  # its icon is a picture's name for the REST pages
        weather.pop("icon", None)
        weather["hourly"] = [[h.get(k) for k in HOURLY] for h in weather.get("hourly") or [] if isinstance(h, dict)]
    answer = {**out, "tripVersion": trip.version, "weather": weather,
              "weatherAvailability": day.weather_availability(trip, stage)}
    answer["ways"]["cues"] = ways.compact_cues(stage, MAX_CUES, STAGE_BYTES - ways.size(answer))
    return answer


def _alert(alert: dict) -> dict:
    out = {"code": alert["code"], "severity": alert["severity"], "group": alert["group"],
           "message": label(alert["message"], STAGE_ALERT), "action": None}
    action = alert.get("action")
    if action:  # `segments` (polylines for a map) stay in the REST detail
        out["action"] = {k: action[k] for k in ACTION_KEYS if k in action}
    return out


def _place(place: dict | None) -> dict | None:
    """A place to sleep as get_stage shows it (copies: the stored JSON must not change under the ORM): what a
    rider acts on (phone, website, address) when the map has them, the price said to be an estimate unless it
    is the place's own."""
    if not place:
        return None
    out = {"name": label(place.get("name")), "type": place.get("type"), "lat": place["lat"], "lon": place["lon"],
           "price": price(place), "distance": place.get("distanceToEndPoint"),
           "possibleClosed": bool(place.get("possibleClosed"))}
    note = price_note(place, i18n.current_locale())
    if note:
        out["priceNote"] = note
    for key, stored, limit in PLACE_CONTACT:
        value = label(place.get(stored), limit) if isinstance(place.get(stored), str) else None
        if key == "website" and value != place.get(stored):
            value = None
        if value:
            out[key] = value
    return out


def _resupply(place: dict) -> dict:
    return {"name": label(place.get("name"), PLACE_NAME), "category": place.get("category"), "km": place.get("km"),
            "openAtPassage": place.get("openAtPassage"),
            "openingHours": label(place.get("openingHours"), STAGE_TEXT)}


def _km(place: dict) -> float:
    km = place.get("km")
    return km if _is_number(km) else float("inf")


def _timeline(entries: list | None, locale: str) -> list[str] | None:
    """The supply timeline as short strings in `locale`'s words, "12.5 km: bakery, supermarket" (a category the
    catalogue does not name is left as it is stored)."""
    if entries is None:
        return None
    return [i18n.say(Msg("mcp.stage.supply_at", km=e["km"], categories=[
        i18n.osm_word("resupply", c, locale) or str(c) for c in e.get("categories") or []]), locale)
        for e in entries if isinstance(e, dict) and _is_number(e.get("km"))]


def _water(point: dict) -> dict:
    out = {"km": point.get("km"), "kind": point.get("kind")}
    name = label(point.get("name"), PLACE_NAME) if isinstance(point.get("name"), str) else None
    return {**out, "name": name} if name else out


def _shop(place: dict) -> dict:
    out = {"km": place.get("km"), "kind": place.get("kind"), "name": label(place.get("name"), PLACE_NAME)}
    phone = place.get("phone")
    return {**out, "phone": label(phone, 40)} if isinstance(phone, str) and phone else out


def _cultural(place: dict) -> dict:
    return {"name": label(place.get("name"), PLACE_NAME), "type": place.get("type"), "km": place.get("km"),
            "distance": place.get("distance"), "openingHours": label(place.get("openingHours"), STAGE_TEXT)}


def list_item(trip: Trip) -> dict:
    item = trip_list_item(trip)
    item["title"] = label(item["title"])
    return item


def ack(result: Msg, version: int | None = None, next_action: Msg | None = None) -> dict:
    """A write tool's answer: what was done and what to do next, in the reader's language, and the version."""
    locale = i18n.current_locale()
    answer = {"result": i18n.say(result, locale),
              "nextAction": None if next_action is None else i18n.say(next_action, locale)}
    if version is not None:
        answer["version"] = version
    return answer


def impact(trip: Trip, share_url: str | None) -> dict:
    return {"tripId": trip.id, "title": label(trip.title), "stageCount": len(trip.stages),
            "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
            "hasActiveShareLink": share_url is not None, "shareUrl": share_url}
