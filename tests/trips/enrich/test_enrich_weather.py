"""Weather (docs/RULES.md "Weather") and the rules cascaded after it (wind/heat/cold/rain/gusts, fords wet or dry),
against the fake Open-Meteo on 127.0.0.1: payloads shaped like the real API (a list of locations for a batch,
null values, an error answer), the 16-day horizon, the derived forecast, comfort index and relative wind,
each code raised and just under its threshold, an outage, the cache, and an undated trip (withheld)."""
from __future__ import annotations

import io
from dataclasses import replace
from datetime import date, timedelta

import pytest

from trips.core.redis_client import get_redis
from tests.enrich_helpers import stage, trip, trip_east
from tests.fakes.openmeteo import get_fake_openmeteo
from tests.fakes.thirdparty import gpx_from_points
from tests.trips.enrich.test_enrich_crossings import at, run
from tests.enrich_helpers import import_map
from tests.trips.enrich.test_enrich_pipeline import ROUTE, route_map
from tests.trips.services.test_pipeline import analysis, reload, run_jobs
from trips.enrich import fords, registry, weather, wind
from trips.enrich.alerts.catalogue import render
from trips.providers import openmeteo
from trips.services.trips import import_gpx

TODAY = weather.today_utc()
LAT, LON = 45.0, 5.0


@pytest.fixture
def fake():
    server = get_fake_openmeteo()
    server.reset()
    yield server
    server.reset()


def compute(fake, snap, **kw):
    return weather.compute(snap, None, config=fake.config(), redis=kw.pop("redis", None), today=TODAY, **kw)


# --- the provider and the fake ------------------------------------------------------------------------------

def test_a_batch_is_one_request_and_the_answer_a_list_of_locations(fake):
    wanted = [(45.001, 5.004, TODAY), (45.3, 5.6, TODAY + timedelta(days=2)), (45.001, 5.0041, TODAY)]
    found = openmeteo.day_forecasts(wanted, fake.config(), None)
    assert len(fake.requests) == 1
    query = fake.requests[0].query
    assert query["latitude"] == ["45.00,45.30"] and query["longitude"] == ["5.00,5.60"]  # one point per 2 dp
    assert query["start_date"] == [TODAY.isoformat()] and query["end_date"] == [(TODAY + timedelta(2)).isoformat()]
    assert query["timezone"] == ["auto"] and set(query["hourly"][0].split(",")) == set(openmeteo.HOURLY)
    assert set(found) == {openmeteo.cache_key(45.0, 5.0, TODAY), openmeteo.cache_key(45.3, 5.6, TODAY + timedelta(2))}
    hours = found[openmeteo.cache_key(45.0, 5.0, TODAY)]["hours"]
    assert [h["hour"] for h in hours] == list(range(24)) and hours[0]["temperature_2m"] == 18.0


def test_one_point_is_a_bare_object_and_nulls_stay_missing(fake):
    fake.values["wind_speed_10m"] = [None] * 24
    fake.values["temperature_2m"] = [None] * 9 + [12.0] * 15
    found = openmeteo.day_forecasts([(LAT, LON, TODAY)], fake.config(), None)
    hours = found[openmeteo.cache_key(LAT, LON, TODAY)]["hours"]
    assert hours[8]["temperature_2m"] is None and hours[9]["temperature_2m"] == 12.0
    assert all(h["wind_speed_10m"] is None for h in hours)
    snap = trip_east(LAT, LON, [30], start_date=TODAY)
    w = compute(fake, snap).data["s1"]["weather"]
    assert w["tempMin"] == 12.0 and [h["hour"] for h in w["hourly"]] == [9, 10, 11]  # 8 h has no temperature
    assert w["windSpeed"] is None and w["comfortIndex"] == 100  # no wind: the default, 0


def test_an_error_answer_is_an_outage_with_a_reason_of_ours(fake):
    fake.error(400, "Latitude must be in range of -90 to 90°. Given: 145.0.")
    with pytest.raises(openmeteo.WeatherUnavailable) as raised:
        openmeteo.day_forecasts([(LAT, LON, TODAY)], fake.config(), None)
    assert raised.value.reason == openmeteo.REFUSED and "Given" not in raised.value.reason
    fake.answer(b'{"hourly": "not arrays"}', times=1)
    result = compute(fake, trip_east(LAT, LON, [30], start_date=TODAY))
    assert result.data == {}  # a location without hours: no forecast, and no failure either
    fake.answer(b"[{}, {}]")  # two locations for the one asked
    assert compute(fake, trip_east(LAT, LON, [30], start_date=TODAY)).failure == openmeteo.UNREADABLE


def test_a_cache_hit_makes_no_second_request(ctx, fake):
    snap = trip_east(LAT, LON, [30, 30], start_date=TODAY)
    redis = get_redis()
    first = compute(fake, snap, redis=redis)
    assert len(fake.requests) == 1 and set(first.data) == {"s1", "s2"}
    fake.fail(503, times=None)  # would fail a second request
    again = compute(fake, snap, redis=redis)
    assert len(fake.requests) == 1 and again.data == first.data
    key = f"{openmeteo.CACHE_PREFIX}:{openmeteo.cache_key(LAT, LON, TODAY)}"
    assert 0 < redis.ttl(key) <= openmeteo.CACHE_TTL_SECONDS


# --- the horizon and the derived forecast -------------------------------------------------------------------

def test_the_horizon_is_today_to_16_days(fake):
    days = [stage(f"d{i}", i, [(LAT, LON), (LAT, LON + 0.2)], date_=TODAY + timedelta(days=off))
            for i, off in enumerate((-1, 0, 16, 17))]
    result = compute(fake, trip(days, start_date=TODAY - timedelta(days=1)))
    assert set(result.data) == {"d1", "d2"} and set(result.alerts) == {"d0", "d1", "d2", "d3"}
    query = fake.requests[0].query
    assert query["start_date"] == [TODAY.isoformat()] and query["end_date"] == [(TODAY + timedelta(16)).isoformat()]
    assert weather.in_horizon(TODAY + timedelta(16), TODAY) and not weather.in_horizon(TODAY + timedelta(17), TODAY)
    fake.reset()
    none = compute(fake, trip([days[0], days[3]], start_date=TODAY - timedelta(days=1)))
    assert none.data == {} and fake.requests == []  # nothing in the horizon: nothing asked


def test_the_derived_forecast_over_the_riding_window(fake):
    # 30 km at 15 km/h from 8 h: 2 h riding + one 10 min break → arrival 10.17 h → hours 8..11
    fake.values.update({
        "temperature_2m": [float(h) for h in range(24)], "apparent_temperature": [h - 1.04 for h in range(24)],
        "precipitation": [0.25] * 24, "precipitation_probability": [float(10 * (h % 5)) for h in range(24)],
        "weather_code": [61.0 if h == 10 else 3.0 for h in range(24)], "uv_index": [2.5] * 24,
        "wind_direction_10m": [90.0 if h == 10 else 0.0 for h in range(24)], "relative_humidity_2m": 85.0,
        "wind_speed_10m": [30.0] * 24, "wind_gusts_10m": [40.0 + h for h in range(24)]})
    snap = trip_east(LAT, LON, [30], start_date=TODAY)
    w = compute(fake, snap).data["s1"]["weather"]
    assert [h["hour"] for h in w["hourly"]] == [8, 9, 10, 11]
    assert (w["tempMin"], w["tempMax"], w["apparentTempMin"], w["apparentTempMax"]) == (8.0, 11.0, 7.0, 10.0)
    # PHP's round() (the original): half away from zero, so 2.5 → 3 and 0.25 → 0.3
    assert w["precipitationMm"] == 1.0 and w["precipitationProbability"] == 40.0 and w["uvIndex"] == 3
    assert (w["description"], w["icon"], w["weatherCode"]) == ("rain", "10d", 61)  # the median slot: 10 h
    assert w["windDirection"] == "E" and w["relativeWindDirection"] == "headwind"  # riding east into it
    assert w["windSpeed"] == 30.0 and w["windGusts"] == 51.0 and w["humidity"] == 85.0
    assert w["comfortIndex"] == 100 - 15 - 2 - 10 and w["date"] == TODAY.isoformat()
    assert w["hourly"][0] == {"hour": 8, "temp": 8.0, "apparentTemp": 7.0, "precipitationMm": 0.3,
                              "precipitationProbability": 30.0, "windSpeed": 30.0, "windGusts": 48.0,
                              "windDirectionDeg": 0.0, "relativeWindDirection": "crosswind", "weatherCode": 3}


@pytest.mark.parametrize("inputs, score", [
    ((20, 10, 60, 10), 100), ((35, 0, 0, 0), 90), ((45, 0, 0, 0), 80), ((0, 0, 0, 0), 90),
    ((20, 30, 0, 0), 85), ((20, 60, 0, 0), 70), ((20, 0, 90, 0), 95), ((20, 0, 0, 100), 70),
    ((45, 60, 100, 100), 10), ((20, None, None, None), 100)])
def test_comfort_index(inputs, score):
    assert weather.comfort_index(*inputs) == score


@pytest.mark.parametrize("wind_from, relation", [
    ("E", "headwind"), ("NE", "headwind"), ("SE", "headwind"), ("O", "tailwind"), ("SO", "tailwind"),
    ("N", "crosswind"), ("S", "crosswind"), ("W", "unknown"), (None, "unknown")])
def test_relative_wind_riding_east(wind_from, relation):
    travel = weather.bearing((LAT, LON), (LAT, LON + 0.5))
    assert travel == pytest.approx(90.0, abs=0.2)
    assert weather.relative_wind(wind_from, travel) == relation
    assert weather.relative_wind("E", weather.bearing((LAT, LON), (LAT, LON))) == "unknown"  # no direction


def test_wmo_codes_and_compass():
    assert [weather.wmo(c)[1] for c in (0, 1, 2, 3, 45, 48, 46, 55, 65, 75, 81, 86, 96, None)] == [
        "01d", "02d", "03d", "04d", "50d", "50d", "01d", "09d", "10d", "13d", "09d", "13d", "11d", "01d"]
    assert [weather.compass(d) for d in (0, 22, 23, 90, 200, 270, 338, 359)] == [
        "N", "N", "NE", "E", "S", "O", "N", "N"]


# --- the rules cascaded after weather -----------------------------------------------------------------------

CALM = {"windSpeed": 10.0, "relativeWindDirection": "tailwind", "comfortIndex": 80, "apparentTempMax": 25.0,
        "apparentTempMin": 10.0, "precipitationMm": 0.0, "windGusts": 20.0, "precipitationProbability": 10.0,
        "hourly": [{"hour": 8}]}


def forecast_days(*forecasts, rest=()):
    days = trip_east(LAT, LON, [30] * len(forecasts), start_date=TODAY, rest=rest).stages
    return trip([replace(s, weather=None if f is None else {**CALM, **f}) for s, f in zip(days, forecasts)],
                start_date=TODAY)


def codes(result, sid):
    return [f.code for f in result.alerts.get(sid, [])]


@pytest.mark.parametrize("field, value, code", [
    ("comfortIndex", 39, "comfort_poor_conditions"), ("comfortIndex", 40, None),
    ("apparentTempMax", 32.0, "heat_extreme"), ("apparentTempMax", 31.9, None),
    ("apparentTempMin", 2.0, "cold_extreme"), ("apparentTempMin", 2.1, None),
    ("precipitationMm", 10.0, "rain_heavy"), ("precipitationMm", 9.9, None),
    ("windGusts", 50.0, "wind_gusts_strong"), ("windGusts", 49.9, None)])
def test_each_weather_rule_at_and_just_under_its_threshold(field, value, code):
    result = wind.compute(forecast_days({field: value}), None)
    assert codes(result, "s1") == ([code] if code else [])
    if code:
        message = render(result.alerts["s1"][0].as_json(), 1)["message"]
        assert "stage 1" in message and str(value).rstrip("0").rstrip(".") in message


def test_heat_and_cold_need_hourly_data():
    result = wind.compute(forecast_days({"apparentTempMax": 40.0, "apparentTempMin": -5.0, "hourly": []}), None)
    assert codes(result, "s1") == []


def test_headwinds_on_60_percent_of_the_days_flag_each_of_them():
    head = {"windSpeed": 25.0, "relativeWindDirection": "headwind"}
    result = wind.compute(forecast_days(head, head, head, {}, {}), None)  # 3/5 = 60 %
    assert [codes(result, f"s{i}") for i in range(1, 6)] == [["wind_headwind"]] * 3 + [[], []]
    assert result.alerts["s1"][0].params == {"count": 3, "total": 5, "threshold": 25.0, "windSpeed": 25.0}
    assert render(result.alerts["s1"][0].as_json(), 1)["message"].startswith("Headwinds expected for 3/5 stages")
    under = wind.compute(forecast_days(head, head, {"windSpeed": 24.9, "relativeWindDirection": "headwind"},
                                       {}, {}), None)  # 2/5
    assert not any(under.alerts.values())
    cross = wind.compute(forecast_days(head, head, {**head, "relativeWindDirection": "crosswind"}, {}, {}), None)
    assert not any(cross.alerts.values())


def test_days_without_a_forecast_and_rest_days_are_not_looked_at():
    result = wind.compute(forecast_days({"windGusts": 80.0}, None, {"windGusts": 80.0}, rest=(2,)), None)
    assert set(result.alerts) == {"s1"}  # s2: no forecast ("never ran"), s3: a rest day


@pytest.mark.parametrize("probability, code", [(50.0, "ford_crossing_wet"), (49.0, "ford_crossing_dry"),
                                               (None, "ford_crossing_dry")])
def test_a_ford_is_wet_from_50_percent_in_the_snapshot_forecast(ctx, tmp_path, probability, code):
    snap = forecast_days({"precipitationProbability": probability})
    result = run(fords, tmp_path, snap, lambda m: m.node(*at(4, 5), {"ford": "yes"}))
    assert codes(result, "s1") == [code]
    if code == "ford_crossing_wet":
        fact = result.alerts["s1"][0]
        assert fact.params == {"count": 1, "precipitationProbability": 50.0}
        assert "rain is forecast" in render(fact.as_json(), 1)["message"]


# --- the analysis end to end --------------------------------------------------------------------------------

FORDS_AT = (100, 1000, 2000)  # a ford on the route each day (days of about 80 km: 800 points)


@pytest.fixture
def mapped(app, ctx, tmp_path):
    """The pipeline's map around the whole route, with a ford on each day's road."""
    region = route_map(ROUTE)
    for i in FORDS_AT:
        region.node(ROUTE[i][0], ROUTE[i][1], {"ford": "yes"})
    return import_map(region, tmp_path)


def dated_trip(rider, start: date | None = TODAY):
    form = {"startDate": start.isoformat()} if start else {}
    return import_gpx(rider[0], io.BytesIO(gpx_from_points(ROUTE, name="Dated")), form)


def test_a_dated_trip_gets_its_forecast_then_the_rules_cascaded_after_it(app, ctx, rider, mapped, fake):  # noqa: F811
    fake.values.update({"wind_gusts_10m": 55.0, "precipitation_probability": 80.0})
    trip_ = dated_trip(rider)
    assert {"weather", "wind"} <= set(analysis(reload(trip_.id)))
    run_jobs(app)
    fresh = reload(trip_.id)
    assert all(status == ("done", None) for status in analysis(fresh).values()), analysis(fresh)
    assert len(fake.requests) == 1  # one batched request for the three days
    for day in fresh.stages:
        assert day.enrichment["weather"]["windGusts"] == 55.0 and day.enrichment["weather"]["hourly"]
        assert "wind_gusts_strong" in [f["code"] for f in day.alerts_by_group["wind"]]
        assert [f["code"] for f in day.alerts_by_group["ford"]] == ["ford_crossing_wet"]  # 80 %


def test_an_outage_fails_weather_with_its_reason_and_nothing_else(app, ctx, rider, mapped, fake):  # noqa: F811
    fake.fail(503, times=None)
    trip_ = dated_trip(rider)
    run_jobs(app)
    fresh = reload(trip_.id)
    statuses = analysis(fresh)
    assert statuses.pop("weather") == ("failed", openmeteo.UNAVAILABLE)
    assert all(status == ("done", None) for status in statuses.values()), statuses  # wind, fords ran after it
    assert all("weather" not in d.enrichment and "wind" not in d.alerts_by_group for d in fresh.stages)
    assert all([f["code"] for f in d.alerts_by_group["ford"]] == ["ford_crossing_dry"] for d in fresh.stages)


def test_an_undated_trip_withholds_weather_and_its_dependents(app, ctx, rider, mapped, fake):  # noqa: F811
    trip_ = dated_trip(rider, None)
    statuses = analysis(reload(trip_.id))
    assert "weather" not in statuses and "wind" not in statuses and statuses["fords"] == ("pending", None)
    assert registry.select(trip_, names=["weather", "wind", "fords"]) == ["fords"]
    run_jobs(app)
    assert fake.requests == [] and analysis(reload(trip_.id))["fords"] == ("done", None)


def test_a_dependent_waits_for_its_need_and_the_reconciler_counts_it_claimed(app, ctx, rider, mapped, fake):  # noqa: F811
    from trips.core.queue import get_queue
    from jobs.reconcile import claims

    trip_ = dated_trip(rider)
    jobs = {j.args[1]: j for j in get_queue().get_jobs()}
    assert "weather" in jobs and "wind" not in jobs and "fords" not in jobs  # queued when weather settles
    assert {(trip_.id, "wind", trip_.generation), (trip_.id, "fords", trip_.generation)} <= claims(jobs["weather"])
    assert registry.dependents("weather") == ("wind", "fords")


def test_departure_and_speed_changes_dispatch_weather_again():
    from trips.services.trips import INVALIDATES

    assert "weather" in INVALIDATES["departure_hour"]["names"] and "weather" in INVALIDATES["average_speed"]["names"]
    assert {"weather", "wind", "fords"} <= {n for n, e in registry.ENRICHMENTS.items() if "DATES" in e.triggers}



# --- the read models ----------------------------------------------------------------------------------------

def test_the_forecast_on_the_wire_and_its_availability_derived_when_read(app, client, rider, fake):
    import jsonschema

    from mcp.tools import get_stage as get_stage_tool
    from mcp.tools import get_trip as get_trip_tool
    from tests.mcp_helpers import call, mcp_token, payload
    from tests.trips.readmodels.test_readmodels_enriched import forecast
    from trips.core.db import atomic, db
    from trips.models import Trip
    from trips.readmodels import day

    user, headers = rider
    start = TODAY - timedelta(days=1)  # day 1 is past, day 2 today, day 3 tomorrow
    made = dated_trip(rider, start)
    with atomic():
        trip_ = db.session.get(Trip, made.id)
        for c in trip_.computations:
            c.status = "pending" if c.name == "weather" else "done"
        trip_.stages[1].enrichment = {"weather": forecast(start, 1)}
    trip_ = reload(made.id)
    first, second, third = trip_.stages
    assert [day.weather_availability(trip_, s) for s in trip_.stages] == ["past", "available", None]  # pending
    assert day.weather_availability(trip_, first, today=start - timedelta(days=17)) == "beyond_horizon"
    with atomic():
        next(c for c in db.session.get(Trip, made.id).computations if c.name == "weather").status = "failed"
    trip_ = reload(made.id)
    assert day.weather_availability(trip_, trip_.stages[2]) == "unavailable"  # settled without data

    doc = client.get("/api/openapi.json").get_json()
    detail = client.get(f"/api/trips/{made.id}/stages/{second.id}", headers=headers).get_json()
    assert detail["weatherAvailability"] == "available" and len(detail["weather"]["hourly"]) == 12
    whole = client.get(f"/api/trips/{made.id}", headers=headers).get_json()
    assert "hourly" not in whole["stages"][1]["weather"] and whole["stages"][2]["weather"] is None
    for name, real in (("StageDetail", detail), ("TripDetail", whole)):
        validator = jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                                     "components": doc["components"]})
        assert validator.is_valid(real), name

    token = mcp_token(app, user)
    stage_answer = payload(call(client, token, "get_stage", {"tripId": made.id, "stageId": second.id}))
    jsonschema.Draft202012Validator(get_stage_tool.OUTPUT).validate(stage_answer)
    assert stage_answer["weather"]["description"] == "rain"  # its hours as rows: hour, °C, rain %, wind, WMO code
    assert all(len(row) == 5 and row[4] == 63 for row in stage_answer["weather"]["hourly"])
    assert stage_answer["weatherAvailability"] == "available"
    digest = payload(call(client, token, "get_trip", {"id": made.id}))
    jsonschema.Draft202012Validator(get_trip_tool.OUTPUT).validate(digest)
    assert [d.get("weather") for d in digest["stages"]] == [None, "rain 12–17°", None]


def test_a_forecast_for_another_date_is_not_shown(ctx, rider):
    from tests.trips.readmodels.test_readmodels_enriched import forecast
    from trips.core.db import atomic, db
    from trips.models import Trip
    from trips.readmodels import day

    made = dated_trip(rider)
    with atomic():
        trip_ = db.session.get(Trip, made.id)
        trip_.stages[0].enrichment = {"weather": forecast(TODAY + timedelta(days=3), 0)}  # the dates moved since
    trip_ = reload(made.id)
    assert day.forecast(trip_, trip_.stages[0]) is None and day.weather_word(trip_, trip_.stages[0]) is None
    with atomic():
        db.session.get(Trip, made.id).start_date = None  # undated now
    trip_ = reload(made.id)
    assert day.weather_availability(trip_, trip_.stages[0]) is None
    assert registry.snapshot(trip_).stages[0].weather is None  # and its dependents see none either


def test_the_digest_names_a_likely_rain_under_a_dry_word(ctx, rider):
    """A mainly clear median hour with a 70 % chance of rain in the riding window: the digest's line says the rain
    (never "mainly clear" alone); under 50 % it does not, nor when the word already says rain."""
    from tests.trips.readmodels.test_readmodels_enriched import forecast
    from trips.core.db import atomic, db
    from trips.models import Trip
    from trips.readmodels import day

    made = dated_trip(rider)
    with atomic():
        stages = db.session.get(Trip, made.id).stages
        for stage, (code, chance) in zip(stages, ((1, 70.0), (1, 40.0), (63, 80.0))):
            stage.enrichment = {"weather": forecast(TODAY, stage.position) | {"weatherCode": code,
                                                                               "precipitationProbability": chance}}
    trip_ = reload(made.id)
    said = [day.weather_word(trip_, s, "en") for s in trip_.stages]
    assert said == ["mainly clear, rain 70% 12–17°", "mainly clear 12–17°", "rain 12–17°"]
    assert day.weather_word(trip_, trip_.stages[0], "fr") == "plutôt dégagé, pluie à 70\u00a0% 12–17°"


def test_a_departure_change_on_a_dated_trip_runs_weather_then_what_reads_it(client, rider, fake):
    from tests.trips.enrich.test_enrich_dispatch import patch, pending, queued, settle

    trip_ = settle(dated_trip(rider, TODAY + timedelta(days=1)).id)  # from today on, the trip is locked
    fresh = patch(client, rider[1], trip_, {"departureHour": 6})
    assert {"terrain", "weather", "wind", "fords"} <= pending(fresh)  # fords and wind read the new forecast
    assert {n for n, _ in queued()} == pending(fresh) - {"wind", "fords"}  # they wait for it
    assert registry.select(fresh, names=["fords"]) == ["fords"]  # a dependent alone runs on what is stored


def test_a_weather_job_failing_for_good_releases_what_waits_on_it(ctx, rider, fake):
    from types import SimpleNamespace

    from trips.core.queue import get_queue
    from jobs.tasks import INTERNAL_FAILURE, settle_failed

    trip_ = dated_trip(rider)
    get_queue().empty()
    job = SimpleNamespace(id="j", func_name="jobs.tasks.run_enrichment", args=(trip_.id, "weather", trip_.generation))
    settle_failed(job, "RuntimeError")
    assert analysis(reload(trip_.id))["weather"] == ("failed", INTERNAL_FAILURE)
    assert sorted(j.args[1] for j in get_queue().get_jobs()) == ["fords", "wind"]  # no longer waiting for ever
