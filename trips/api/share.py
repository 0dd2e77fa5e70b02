"""Sharing: the owner's REST endpoints, and the public link's page, GPX file and route."""
from __future__ import annotations

from datetime import timedelta

from babel.dates import format_date
from flask import Blueprint, g, jsonify, render_template

from oauth.kernel.models import User
from oauth.kernel.principal import require_api_scope
from trips.core import i18n
from trips.readmodels import trip as readmodels
from trips.readmodels.day import best_accommodation, place_price as price
from trips.readmodels import pictures
from trips.readmodels import amenities, straight, ways
from trips.core.i18n import N_
from trips.enrich import accommodations
from trips.enrich.corridor import FULL_COVERAGE, held_km
from trips.osm import basemap
from trips.osm import queries as Q
from trips.services import sharing
from trips.api.trips import READ, WRITE
from trips.api.exports import gpx_download, ics_download
from trips.core.db import db
from trips.core.problems import conditional_json
from trips.core.text import clean_answer, floor

api = Blueprint("share_api", __name__, url_prefix="/api")
pages = Blueprint("share_pages", __name__)


def share_body(share) -> dict:
    return {"url": sharing.share_url(share), "shortCode": share.short_code,
            "createdAt": share.created_at.isoformat() + "Z"}


@api.post("/trips/<trip_id>/share")
@require_api_scope(WRITE)
def create(trip_id):
    share, created = sharing.share_trip(g.principal.user, trip_id)
    return jsonify(share_body(share)), 201 if created else 200


@api.get("/trips/<trip_id>/share")
@require_api_scope(READ)
def read(trip_id):
    return jsonify(share_body(sharing.get_share(g.principal.user, trip_id)))


@api.delete("/trips/<trip_id>/share")
@require_api_scope(WRITE)
def revoke(trip_id):
    sharing.unshare_trip(g.principal.user, trip_id)
    return "", 204


@api.get("/s/<code>/route")
def shared_route(code):
    # The share is looked up first: a revoked link is a 404 even for a client holding an ETag.
    return conditional_json(readmodels.trip_route(sharing.shared_trip(code)))


@pages.get("/s/<code>")
def shared_page(code):
    trip = sharing.shared_trip(code)
    locale = i18n.normalize(_owner_locale(trip)) or i18n.DEFAULT
    i18n.pin(locale)  # the alerts and the page's words read in the owner's language, whoever opens the link
    # The page shows the owner's and third parties' words to anyone with the link: Jinja's escaping keeps markup
    # out, and the text floor (trips/core/text.py) keeps bidi overrides and control characters from reshaping it.
    text = clean_answer({
        "title": trip.title, "detail": readmodels.trip_detail(trip),
        "stays": {s.id: _stay(s) for s in trip.stages},
    })
    response = render_template("share.html", trip=trip, title=text["title"], detail=text["detail"],
                               stays=text["stays"], timedelta=timedelta, pictures=_pictures(trip, locale),
                               services=_all_services(trip, text["detail"]["stages"], locale),
                               nights=_nights(text["detail"]["stages"], locale),
                               ways={s.id: clean_answer(ways.share_view(trip, s, locale)) for s in trip.stages
                                     if not s.is_rest_day},
                               day_date=lambda value: format_date(value, "EEE d MMM", locale=locale))
    return response, 200, {"Cache-Control": "private, no-cache", "X-Robots-Tag": "noindex"}


def _pictures(trip, locale: str) -> dict:
    """The share page's drawings (trips/readmodels/pictures.py): the route by day, the trip's profile, and per
    stage id its profile and weather (None without a forecast). The geometry is read here, never put on the
    wire."""
    stages = sorted(trip.stages, key=lambda s: s.day_number)
    series, km = {}, 0.0
    for stage in stages:
        series[stage.id] = pictures.distance_profile(stage.geometry or [], km)
        km = series[stage.id][-1][0] if series[stage.id] else km
    moving = [s for s in stages if not s.is_rest_day and len(s.geometry or []) >= 2]
    colours = {s.id: pictures.colour(i) for i, s in enumerate(moving)}
    days, marks = {}, (i18n.t("share.max", locale), i18n.t("share.min", locale))
    number = lambda value, digits: i18n.number(value, locale, digits)  # noqa: E731
    for stage in stages:
        own = [(k - series[stage.id][0][0], e) for k, e in series[stage.id]] if series[stage.id] else []
        days[stage.id] = {
            "colour": colours.get(stage.id),
            "profile": pictures.profile_svg([own], i18n.t("share.day_elevation", locale, day=stage.day_number),
                                            [colours.get(stage.id, pictures.PALETTE[0])], marks, number),
            "weather": pictures.day_weather((stage.enrichment or {}).get("weather"),
                                            (stage.start_lat, stage.start_lon), (stage.end_lat, stage.end_lon),
                                            locale),
        }
    joins = straight.straight_lines(trip, stages)
    route = [{"number": s.day_number, "geometry": s.geometry, "straight": joins.get(s.id)} for s in moving]
    view = pictures.route_view(route)[1].view_box() if moving else None
    return {
        "route": pictures.route_svg(route, floor(trip.title or i18n.t("share.route", locale)),
                                    base=basemap.base_map(view) if view else None,
                                    scale_label=lambda km: f"{number(km, 1)}\u00a0km"),
        "profile": pictures.profile_svg([series[s.id] for s in moving], i18n.t("share.trip_elevation", locale),
                                        [colours[s.id] for s in moving], marks, number),
        "days": days,
    }


_SERVICE_WORDS = {"food": (N_("share.food"), "resupply"), "water": (N_("share.water"), "water"),
                  "bikeShops": (N_("share.bike_shops"), "bike_shop")}
_NIGHT_WORDS = {"running": N_("share.services_running"), "off_map": N_("share.services_off_map"),
                "end_off_map": N_("share.night_end_off_map"), "failed": N_("share.services_failed"),
                "none": N_("share.night_none"), "unknown": N_("share.services_unknown")}
NIGHT_NONE_COVERED = N_("share.night_none_covered")


def _nights(days: list[dict], locale: str) -> dict[str, str]:
    """Per stage id, what the page says of a night no place is named for: "nowhere found" only of the disc the
    lodging search covers whole; of the part the map covers when it holds only part (docs/RULES.md "Map coverage")."""
    areas, radius = Q.ready_areas(db.engine), accommodations.DEFAULT_RADIUS_KM * 1000.0
    out = {}
    for day in days:
        state = amenities.night(day)
        out[day["stageId"]] = i18n.t(_NIGHT_WORDS[state], locale)
        end = day.get("endPoint") or {}
        if state == "none" and end.get("lat") is not None:
            held = Q.disc_cover(end["lat"], end["lon"], radius, areas)[1]
            if held < radius:
                out[day["stageId"]] = i18n.t(NIGHT_NONE_COVERED, locale, km=i18n.number(held_km(held), locale)) \
                    if held_km(held) > 0 else i18n.t(_NIGHT_WORDS["end_off_map"], locale)
    return out


_STATE_WORDS = {"none": N_("share.services_none"), "running": N_("share.services_running"),
                "failed": N_("share.services_failed"), "off_map": N_("share.services_off_map"),
                "unknown": N_("share.services_unknown")}


SERVICES_CORRIDOR_M = 2000.0  # the food, water and bike shop searches' width (trips/enrich: CORRIDOR_M, RADIUS_M)


def _all_services(trip, days: list[dict], locale: str) -> dict[str, list[tuple[str, str, str]]]:
    """`_services` of every day, a "nothing found" said partial where the map holds the day's line but not all
    of the 2 km around it (docs/RULES.md "Map coverage")."""
    areas, lines = Q.ready_areas(db.engine), {s.id: s.geometry or [] for s in trip.stages}
    out = {}
    for day in days:
        line = [p[:2] for p in lines.get(day["stageId"], [])]
        found = amenities.day_services(day)
        if any(f["state"] == "none" and not f["partial"] for f in found.values()) and len(line) >= 2:
            whole = Q.corridor_cover(line, SERVICES_CORRIDOR_M, areas)[0] >= FULL_COVERAGE
            found = {k: {**f, "partial": f["partial"] or not whole} for k, f in found.items()}
        out[day["stageId"]] = _services(found, locale)
    return out


def _services(services: dict, locale: str) -> list[tuple[str, str, str]]:
    """(kind, label, words) of the day's food, water and bike shops (trips/readmodels/amenities.py): each place by its
    name, else its kind in words, at its km; what is not known said so (docs/RULES.md "Map coverage")."""
    out = []
    for kind, found in services.items():
        label, table = _SERVICE_WORDS[kind]
        if found["state"] == "listed":
            items = [_place(p, table, locale) for p in found["items"]]
            words = ", ".join(items) + (" " + i18n.tn("share.and_more", found["more"], locale) if found["more"] else "")
        else:
            said = _STATE_WORDS[found["state"]]
            words = i18n.t(said, locale)
        if found["partial"]:
            words += " " + i18n.t("share.services_partial", locale)
        out.append((kind, i18n.t(label, locale), words))
    return out


def _place(place: dict, table: str, locale: str) -> str:
    """A place by its name, else its kind in words (pages.po `osm.<table>.<kind>`), at its km when known."""
    what = place["name"] or i18n.osm_word(table, place["kind"], locale) or i18n.t("share.unnamed", locale)
    if place["km"] is None:
        return what
    return i18n.t("share.item_at_km", locale, what=what, km=i18n.number(place["km"], locale))


def _owner_locale(trip) -> str | None:
    """The owner's chosen language, else the trip's (the account's then): docs/RULES.md "Rendering at read time"."""
    owner = db.session.get(User, trip.user_id)
    return i18n.normalize(owner.locale if owner else None) or trip.locale


def _stay(stage) -> dict | None:
    place, chosen = best_accommodation(stage)
    if place is None:
        return None
    money = price(place)  # in its own currency, or none: never a figure in a money it may not be in
    return {"name": place.get("name"), "type": place.get("type"), "chosen": chosen,
            "priceMin": money and money["min"], "priceMax": money and money["max"],
            "currency": money and money["currency"],
            "exactPrice": bool(place.get("isExactPrice"))}  # else the type's and stars' estimate, said so


@pages.get("/s/<code>.gpx")
def shared_gpx(code):
    return gpx_download(sharing.shared_trip(code), public=True)


@pages.get("/s/<code>.ics")
def shared_ics(code):
    trip = sharing.shared_trip(code)
    return ics_download(trip, i18n.normalize(_owner_locale(trip)) or i18n.DEFAULT)  # in the page's language
