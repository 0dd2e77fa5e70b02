"""The day read model with the enrichments' data: alerts rendered at read time and severity-ordered, which
groups ran, accommodations with their price range; the same day in REST, get_stage, the digest and the
share page (trips/readmodels/day.py, mcp/answers.py)."""
import io
from datetime import date, timedelta

import jsonschema
import pytest

from tests.factories import auth, make_token

from mcp.tools import get_stage as get_stage_tool
from mcp.tools import get_trip as get_trip_tool
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from oauth.kernel.models import User
from trips.core.db import atomic, db
from trips.enrich.alerts.catalogue import GROUPS
from trips.models import Stage, Trip
from trips.readmodels import day
from trips.services.trips import import_gpx

LONG = "Quai de la Grande Chartreuse et des Anciens Remparts de Saint-Laurent-du-Pont"
SEGMENTS = [[[45.0 + i * 1e-3, 5.0 + j * 1e-3] for j in range(32)] for i in range(10)]  # the terrain cap


def navigate(segments=False) -> dict:
    return {"kind": "navigate", "lat": 45.123456, "lon": 5.654321, **({"segments": SEGMENTS} if segments else {})}


def facts(next_day: int, gap: bool = True) -> dict:
    """Every group of the catalogue filled with real codes and long-ish parameters (calendar and wind have
    no code here: ran, found nothing); `gap` adds a second critical alert (a broken route)."""
    return {
        "terrain": [
            {"code": "surface_rough", "params": {"length": 12.34, "surface": "gravel, compacted, fine_gravel"},
             "action": navigate(True)},
            {"code": "traffic_main_road", "params": {"count": 4, "length": 7.25}, "action": navigate(True)},
            *([{"code": "continuity_gap_critical", "params": {"distance": 1.52, "next": next_day},
                "action": navigate()}] if gap else []),
            {"code": "steep_gradient", "params": {"gradient": 11.5, "distance": 1.25}, "action": navigate()},
            {"code": "elevation_gain", "params": {"elevation": 1650},
             "action": {"kind": "auto_fix", "splitAtKm": 42.5}},
            {"code": "rest_day_suggested", "params": {"days": 3}, "action": {"kind": "auto_fix", "afterStage": 3}},
        ],
        "pois": [{"code": "resupply_closed_at_passage", "params": {"count": 6}}],
        "accommodations": [{"code": "accommodation_seasonal_closure", "params": {"count": 5}}],
        "calendar": [], "wind": [],
        "bike_shop": [{"code": "bike_shop_none_nearby", "params": {}, "action": navigate()}],
        "water_point": [{"code": "water_point_gap", "params": {"threshold": 30, "gap": 41.7, "fromKm": 12.3,
                                                                 "toKm": 54.0}, "action": navigate()}],
        "health_service": [{"code": "health_service_none_nearby", "params": {"threshold": 15}}],
        "cultural_poi": [{"code": "cultural_poi_suggestion", "params": {"name": f"{LONG} {i}", "type": "castle",
                                                                        "distance": 420}} for i in range(3)],
        "railway_station": [{"code": "railway_station_none_nearby", "params": {"threshold": 10},
                             "action": navigate()}],
        "border_crossing": [{"code": "border_crossing", "params": {"country": "CH"}, "action": navigate()}],
        "ferry": [{"code": "ferry_crossing", "params": {"name": LONG}, "action": navigate()}],
        "ford": [{"code": "ford_crossing_dry", "params": {"count": 2}, "action": navigate()}],
    }


def in_horizon(start, position: int) -> bool:
    """Whether the day can have a forecast: today to today + 16 days (docs/RULES.md "Weather")."""
    from trips.enrich.weather import in_horizon as within, today_utc

    return within(start + timedelta(days=position), today_utc())


def forecast(start, position: int) -> dict:
    """A day's forecast as trips/enrich/weather.py stores it: a 12-hour riding window, wet and windy."""
    hourly = [{"hour": 7 + h, "temp": 11.5 + h / 2, "apparentTemp": 9.5 + h / 2, "precipitationMm": 1.2,
               "precipitationProbability": 80.0, "windSpeed": 28.5, "windGusts": 52.5, "windDirectionDeg": 225.0,
               "relativeWindDirection": "headwind", "weatherCode": 63} for h in range(12)]
    return {"date": (start + timedelta(days=position)).isoformat(), "icon": "10d", "description": "rain",
            "weatherCode": 63, "tempMin": 11.5, "tempMax": 17.0, "apparentTempMin": 9.5, "apparentTempMax": 15.0,
            "windSpeed": 28.5, "windGusts": 52.5, "windDirection": "SO", "precipitationProbability": 80.0,
            "precipitationMm": 14.4, "humidity": 88.0, "uvIndex": 2, "comfortIndex": 33,
            "relativeWindDirection": "headwind", "hourly": hourly}


def candidates() -> list[dict]:
    return [{"name": f"{LONG} {kind}", "type": kind, "lat": 45.2 + i / 100, "lon": 5.7, "estimatedPriceMin": 8 + i,
             "estimatedPriceMax": 25 + i, "currency": "EUR", "isExactPrice": i == 0, "possibleClosed": i == 1,
             "distanceToEndPoint": 1.234 + i, "source": "osm", "description": LONG * 3, "osmType": "node",
             "osmId": 1000 + i}
            for i, kind in enumerate(("camp_site", "hostel", "hotel", "guest_house", "chalet"))]


def enrichment() -> dict:
    return {
        "resupply": [{"name": f"{LONG} {i}", "category": "bakery", "lat": 45.1, "lon": 5.7, "km": 3.5 * i,
                      "openingHours": "Mo-Sa 07:00-19:30; Su 08:00-12:30", "openAtPassage": i % 2 == 0}
                     for i in range(6)],
        "supplyTimeline": [{"km": 0.5 * i, "categories": ["bakery", "cafe"]} for i in range(24)],
        "culturalPois": [{"name": f"{LONG} {i}", "type": "castle", "lat": 45.1, "lon": 5.7, "km": 10.0 + i,
                          "distance": 420, "openingHours": "Apr-Oct 10:00-18:00", "fee": "8 EUR", "image": None,
                          "website": "https://example.org/castle"} for i in range(3)],
        "terrain": {"roughKm": 12.34, "mainRoadKm": 7.25, "steepestPct": 11.5, "mapCoverage": 1.0},
        "surfaces": {"paved": 60.1, "compacted": 10.0, "unpaved": 5.2, "unknown": 4.7},
        "wayTypes": {"cycleway": 20.3, "quiet_road": 30.0, "main_road": 9.9, "track": 10.0, "path": 5.0, "ferry": 1.0,
                     "unknown": 3.8},
        "cues": [{"km": 1.5 * i, "turn": "sharp_right" if i % 7 else "roundabout", "exit": 3, "street": f"{LONG} {i}",
                  "lat": 45.1, "lon": 5.7} for i in range(40)],
        "waysReason": None,
        "bikeShops": [{"km": 5.0 * i, "kind": ("repair", "shop", "repair_station")[i % 3], "name": f"{LONG} {i}",
                       "lat": 45.1, "lon": 5.7, "phone": "+33 4 76 00 00 00", "website": "https://example.org/velo"}
                      for i in range(6)],
        "railwayStations": [{"end": end, "name": f"{LONG} {end}", "distance": 3.4, "lat": 45.1, "lon": 5.7}
                            for end in ("start", "end")],
    }


def thirty_filled_days(user) -> Trip:
    """A dated 30-day trip with a 300-character title, every day filled as a complete analysis leaves it (a
    continuity gap every fifth day): the digest budget's worst case."""
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(30 * 350), name="T" * 300)),
                      {"fatigueFactor": "1.0", "startDate": str(date.today()),
                       "endDate": str(date.today() + timedelta(days=29))})
    fill(trip.id, gaps_every=5)
    return trip


def fill(trip_id: str, *, chosen: bool = False, gaps_every: int = 1) -> None:
    """Every day of the trip as a complete analysis leaves it (a continuity gap on every `gaps_every`th day)."""
    with atomic():
        trip = db.session.get(Trip, trip_id)
        trip.out_of_zone = True
        for stage in trip.stages:
            stage.alerts_by_group = facts(stage.day_number + 1, gap=(stage.day_number - 1) % gaps_every == 0)
            stage.enrichment = enrichment()
            if trip.start_date is not None and in_horizon(trip.start_date, stage.position):
                stage.enrichment = {**stage.enrichment, "weather": forecast(trip.start_date, stage.position)}
            if chosen:
                stage.selected_accommodation = {**candidates()[2], "name": "Chosen " + LONG}
            else:
                stage.accommodations = candidates()


@pytest.fixture
def owner(app, ctx):
    """A trip whose analysis settled (the upload dispatches it; no worker runs here): statuses set by hand."""
    user = make_user("owner@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Vercors")), {})
    settle(trip.id)
    return user, trip, mcp_token(app, user)


def settle(trip_id: str, **statuses) -> None:
    """Every computation of the trip done, but those named (name=status)."""
    with atomic():
        for c in db.session.get(Trip, trip_id).computations:
            c.status = statuses.get(c.name, "done")


def first_stage(trip_id: str) -> Stage:
    return db.session.query(Stage).filter_by(trip_id=trip_id, position=0).one()


def test_alerts_are_rendered_critical_first_with_the_country_named(owner):
    _, trip, _ = owner
    fill(trip.id)
    rendered = day.alerts(first_stage(trip.id))
    severities = [a["severity"] for a in rendered]
    assert severities == sorted(severities, key=["critical", "warning", "nudge"].index)
    assert severities[:2] == ["critical", "critical"] and len(rendered) == 18
    messages = {a["code"]: a["message"] for a in rendered}
    assert messages["border_crossing"].startswith("You are entering Switzerland.")  # stored as the ISO code
    assert messages["continuity_gap_critical"] == "Discontinuity: 1.5 km between stage 1 and 2."
    assert all("{" not in m for m in messages.values())


def test_a_group_that_never_ran_is_not_computed_never_done(owner):
    _, trip, _ = owner
    with atomic():
        stage = first_stage(trip.id)
        stage.alerts_by_group = {"terrain": [], "ford": [{"code": "ford_crossing_dry", "params": {"count": 1}}]}
        stage.enrichment = {**(stage.enrichment or {}), "mapCoverage": {"share": 1.0, "offMapKm": []}}  # on the map
    settle(trip.id, pois="running", ferries="failed", fords="pending")
    groups = day.group_statuses(db.session.get(Trip, trip.id), first_stage(trip.id))
    assert groups["terrain"] == "done"  # [] = ran, found nothing
    assert groups["pois"] == "running" and groups["ferry"] == "failed"
    assert groups["ford"] == "running"  # stored facts, but a new run is queued: ask again
    assert groups["water_point"] == "not computed" and groups["wind"] == "not computed"
    assert set(groups) == set(GROUPS)
    assert day.group_statuses(db.session.get(Trip, trip.id), db.session.query(Stage).filter_by(
        trip_id=trip.id, position=1).one())["terrain"] == "not computed"  # another day: nothing stored


def test_an_unknown_code_renders_by_its_code_without_failing_the_read(owner):
    _, trip, _ = owner
    with atomic():
        first_stage(trip.id).alerts_by_group = {"terrain": [{"code": "gone_from_the_catalogue", "params": {}}]}
    assert day.alerts(first_stage(trip.id)) == [{"code": "gone_from_the_catalogue", "severity": "nudge",
                                                 "group": None, "message": "gone_from_the_catalogue"}]


def test_get_stage_carries_alerts_without_polylines_and_five_priced_places(app, client, owner):
    _, trip, token = owner
    fill(trip.id)
    stage_id = first_stage(trip.id).id
    answer = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stage_id}))
    jsonschema.Draft202012Validator(get_stage_tool.OUTPUT).validate(answer)
    assert answer["alertCount"] == 18 and answer["alerts"][0]["severity"] == "critical"
    assert all("segments" not in (a["action"] or {}) for a in answer["alerts"])
    rough = next(a for a in answer["alerts"] if a["code"] == "surface_rough")
    assert rough["action"] == {"kind": "navigate", "lat": 45.123456, "lon": 5.654321}
    assert len(answer["accommodations"]) == 5
    assert answer["accommodations"][0] == {
        "name": f"{LONG} camp_site", "type": "camp_site", "lat": 45.2, "lon": 5.7,
        "price": {"min": 8, "max": 25, "currency": "EUR", "estimate": False}, "distance": 1.234, "possibleClosed": False}
    assert answer["accommodations"][1]["price"] == {"min": 9, "max": 26, "currency": "EUR", "estimate": True}  # a bracket's
    assert answer["groups"]["terrain"] == "done"
    assert answer["weather"] is None and answer["weatherAvailability"] is None  # an undated trip: no forecast
    assert len(answer["resupply"]) == 6 and answer["resupply"][0]["openAtPassage"] is True
    assert answer["culturalPois"][0]["type"] == "castle" and answer["terrain"]["roughKm"] == 12.34
    assert "events" not in answer and isinstance(answer["categoryStatus"], list)


def test_get_stage_before_any_analysis_claims_nothing(client, owner):
    _, trip, token = owner
    with atomic():
        db.session.get(Trip, trip.id).computations.clear()  # a trip from before the analysis existed
    answer = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": first_stage(trip.id).id}))
    assert answer["alerts"] == [] and set(answer["groups"].values()) == {"not computed"}
    assert answer["resupply"] is None and answer["culturalPois"] is None and answer["terrain"] is None


def test_the_rest_stage_detail_carries_the_polylines_and_matches_the_document(client, owner):
    user, trip, _ = owner
    fill(trip.id)
    headers = auth(make_token(user))
    stage_id = first_stage(trip.id).id
    doc = client.get("/api/openapi.json").get_json()
    body = client.get(f"/api/trips/{trip.id}/stages/{stage_id}", headers=headers).get_json()
    assert body["outOfZone"] is True and body["alertCount"] == 18
    assert next(a for a in body["alerts"] if a["code"] == "surface_rough")["action"]["segments"] == SEGMENTS
    assert body["supplyTimeline"][0] == {"km": 0.0, "categories": ["bakery", "cafe"]}
    detail = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert detail["outOfZone"] is True and len(detail["stages"][0]["alerts"]) == 18
    inside = next(a for a in detail["stages"][0]["alerts"] if a["code"] == "surface_rough")
    assert inside["action"] == {"kind": "navigate", "lat": 45.123456, "lon": 5.654321}  # polylines: day alone
    for name, real in (("StageDetail", body), ("TripDetail", detail)):
        validator = jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                                     "components": doc["components"]})
        assert validator.is_valid(real), name
        assert not validator.is_valid({**real, "groups": {"terrain": "maybe"}})  # statuses are closed


def test_the_digest_names_the_best_candidate_then_the_choice(client, owner):
    _, trip, token = owner
    fill(trip.id)
    digest = payload(call(client, token, "get_trip", {"id": trip.id}))
    jsonschema.Draft202012Validator(get_trip_tool.OUTPUT).validate(digest)
    line = digest["stages"][0]
    assert digest["outOfZone"] is True and line["alertCount"] == 18
    assert line["criticalAlerts"] == ["4 segments on main road without bike lane detected (7.2 km…",
                                      "Discontinuity: 1.5 km between stage 1 and 2."]
    assert line["accommodation"] == "suggested: Quai de la… · 8–25 €"  # cut at a word
    fill(trip.id, chosen=True)
    line = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"][0]
    assert line["accommodation"] == "Chosen Quai de… · ~10–27 €"  # the choice, not a suggestion


def test_a_price_is_said_in_its_currency_and_none_is_said_with_why(client, owner):
    """A US luxury hotel with no table to estimate it: get_stage's price is null with the reason in the reader's
    words, the digest and the share page say no figure; a Swiss one is said in francs, never in euros."""
    user, trip, token = owner
    fill(trip.id)
    palace = {"name": "The Palace", "type": "hotel", "lat": 40.76, "lon": -73.98, "isExactPrice": False,
              "priceReason": "no_basis", "country": "US", "possibleClosed": False, "distanceToEndPoint": 0.4}
    swiss = {"name": "Hôtel du Lac", "type": "hotel", "lat": 46.2, "lon": 6.1, "estimatedPriceMin": 100.0,
             "estimatedPriceMax": 220.0, "isExactPrice": False, "currency": "CHF"}
    with atomic():
        stages = db.session.get(Trip, trip.id).stages
        stages[0].accommodations, stages[1].accommodations = [palace], [swiss]
    first = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stages[0].id}))
    place = first["accommodations"][0]
    assert place["price"] is None
    assert place["priceNote"] == "No price: BTP has no price table for United States; ask the place."
    second = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stages[1].id}))
    assert second["accommodations"][0]["price"] == {"min": 100.0, "max": 220.0, "currency": "CHF", "estimate": True}
    lines = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert lines[0]["accommodation"] == "suggested: The Palace"  # no figure: none is known
    assert lines[1]["accommodation"] == "suggested: Hôtel du Lac · ~100–220 CHF"
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    html = client.get(f"/s/{code}").get_data(as_text=True)
    assert "about 100–220 CHF a night" in html and "€" not in html.split("The Palace")[1].split("</p>")[0]
    with atomic():
        db.session.get(type(user), user.id).locale = "fr"
    french = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stages[0].id}))
    assert french["accommodations"][0]["priceNote"].startswith("Pas de prix\u00a0: BTP n'a pas de barème")


def test_the_share_page_shows_alerts_by_severity_and_the_suggested_night(client, owner):
    user, trip, _ = owner
    fill(trip.id)
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    html = client.get(f"/s/{code}").get_data(as_text=True)
    assert "Suggested night: " + f"{LONG} camp_site (campsite) · 8–25 € a night" in html  # the OSM value in words
    first = html.index("Discontinuity: 1.5 km")
    assert html.index("4 segments on main road") < first < html.index("Rough surface") < html.index(
        "No bike shop doing repairs detected within 2 km of stage 1")
    assert "You are entering Switzerland." in html


def test_an_estimated_price_is_said_to_be_one_on_the_share_page(client, owner):
    """The chosen place's price is the estimate of its type and stars (isExactPrice false): "about", not a quote."""
    user, trip, _ = owner
    fill(trip.id, chosen=True)
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    html = client.get(f"/s/{code}").get_data(as_text=True)
    assert "(hotel) · about 10–27 € a night" in html and "· 10–27 € a night" not in html
    with atomic():  # the page speaks its owner's language
        db.session.get(User, user.id).locale = "fr"
    assert "(hôtel) · environ 10 à 27\u00a0€ la nuit" in client.get(f"/s/{code}").get_data(as_text=True)

def test_third_party_text_inside_an_alert_is_bounded_and_floored(client, owner):
    user, trip, token = owner
    with atomic():
        first_stage(trip.id).alerts_by_group = {"cultural_poi": [{"code": "cultural_poi_suggestion", "params": {
            "name": "\u202eCastle\u2028" + "x" * 5000, "type": "castle", "distance": 12}}]}
    answer = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": first_stage(trip.id).id}))
    message = answer["alerts"][0]["message"]
    assert message == "Cultural POI nearby on stage 1: Castle…"  # cut at a word, the 5 000 x's one word past 300
    assert "\u202e" not in message and "\u2028" not in message
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    html = client.get(f"/s/{code}").get_data(as_text=True)
    assert "stage 1: Castle x" in html and "\u202e" not in html


def test_a_place_without_an_estimate_is_named_without_a_price_and_no_place_is_null(client, owner):
    _, trip, token = owner
    with atomic():
        first_stage(trip.id).selected_accommodation = {"name": "Chez Paul", "type": "other", "lat": 45.0, "lon": 5.0}
    lines = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert lines[0]["accommodation"] == "Chez Paul" and lines[1]["accommodation"] is None
