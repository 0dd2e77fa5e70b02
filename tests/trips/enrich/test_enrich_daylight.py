"""Daylight (docs/RULES.md "Daylight"): the arrival (departureHour +
riding time) against civil twilight end at the day's end point, in its local time; the auto-fix departure
hour; nothing in polar day or night, on a rest day, or without a start date."""
import io
from datetime import date

import pytest

from tests.enrich_helpers import stage, trip
from tests.trips.enrich.test_enrich_dispatch import FUTURE, GPX, patch, pending, settle
from trips.enrich import daylight
from trips.enrich.alerts.calendar import SUNSET_ARRIVAL_AFTER_TWILIGHT
from trips.enrich.alerts.catalogue import render
from trips.route.pacing import rider_time
from trips.services.trips import import_gpx

PARIS = (48.857, 2.352)
SOLSTICE = date(2026, 6, 21)
# Paris on 21 June 2026: sunset 21:57, civil twilight end 22:41 local (CEST, UTC+2), as almanacs give it.
TWILIGHT = 22 + 41 / 60
SPEED = 15.0


def distance_for(arrival: float, departure: int, speed: float = SPEED) -> float:
    """The day's length (flat) at which the pacing formula arrives at `arrival` (decimal hours)."""
    lo, hi = 0.0, 1000.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rider_time(mid, 0.0, speed, departure).arrival_hour < arrival else (lo, mid)
    return lo


def day_ending_at(where, km: float, *, rest: bool = False, sid: str = "s1", index: int = 0):
    return stage(sid, index, [(where[0] - 0.1, where[1]), where], distance_km=km, rest=rest)


def run(stages, *, start=SOLSTICE, departure: int = 8):
    return daylight.compute(trip(stages, start_date=start, departure_hour=departure, average_speed=SPEED), None)


@pytest.mark.parametrize("minutes,alerted", [(-3, False), (3, True)])
def test_arrival_minutes_either_side_of_twilight(minutes, alerted):
    km = distance_for(TWILIGHT + minutes / 60, departure=8)
    result = run([day_ending_at(PARIS, km)])
    assert list(result.alerts) == ["s1"]
    got = result.alerts["s1"]
    assert bool(got) is alerted
    if alerted:
        assert got[0].code == SUNSET_ARRIVAL_AFTER_TWILIGHT.code
        assert got[0].params == {"arrival": "22:44", "twilight": "22:41", "sunset": "21:57"}


def test_the_twilight_is_the_end_points_local_one():
    """Madrid is an hour west of Paris on the same clock: its twilight is ~22:19 CEST, so an arrival at 22:30
    is after it there and not in Paris (a UTC reading would put both before 21:00 and alert both)."""
    km = distance_for(22.5, departure=8)
    madrid, paris = run([day_ending_at((40.417, -3.704), km)]), run([day_ending_at(PARIS, km)])
    assert madrid.alerts["s1"] and madrid.alerts["s1"][0].params["twilight"].startswith("22:")
    assert paris.alerts["s1"] == []


@pytest.mark.parametrize("departure,arrival,fixed", [(8, 23.0, 7), (8, 26.0, 5), (10, 23.5, 9)])
def test_the_auto_fix_departure_hour(departure, arrival, fixed):
    """max(5, floor(twilight − (arrival − departureHour))): 22:41 − 15 h → 7; 22:41 − 18 h → 4, floored at 5."""
    fact = run([day_ending_at(PARIS, distance_for(arrival, departure))], departure=departure).alerts["s1"][0]
    assert fact.action == {"kind": "auto_fix", "departureHour": fixed}


@pytest.mark.parametrize("day", [date(2026, 6, 21), date(2026, 12, 21)], ids=["midnight sun", "polar night"])
def test_polar_day_and_night_say_nothing(day):
    tromso = (69.649, 18.956)
    assert daylight.sky(*tromso, day) is None
    result = run([day_ending_at(tromso, distance_for(25.0, 8))], start=day)
    assert result.alerts == {"s1": []}  # looked at: no twilight end to beat


def test_a_rest_day_is_looked_at_and_skipped():
    result = run([day_ending_at(PARIS, 1.0), day_ending_at(PARIS, 0.0, rest=True, sid="s2", index=1)],
                 departure=23)
    assert [f.code for f in result.alerts["s1"]] == [SUNSET_ARRIVAL_AFTER_TWILIGHT.code]  # 23:04 > 22:41
    assert result.alerts["s2"] == []


def test_no_start_date_says_nothing_and_looks_at_no_day():
    snap = trip([day_ending_at(PARIS, distance_for(25.0, 8))], departure_hour=8)
    assert daylight.compute(snap, None).alerts == {}


def test_the_alert_reads_with_its_times(ctx):
    fact = run([day_ending_at(PARIS, distance_for(23.0, 8))]).alerts["s1"][0]
    shown = render(fact.as_json(), 4, "en")
    assert shown["group"] == "daylight" and shown["severity"] == "warning"
    assert "Stage 4" in shown["message"] and "22:41" in shown["message"] and "21:57" in shown["message"]
    assert shown["action"] == {"kind": "auto_fix", "departureHour": 7}


# --- what re-dispatches it ----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [{"departureHour": 6}, {"averageSpeed": 22.5}], ids=["departureHour", "speed"])
@pytest.mark.parametrize("dated", [True, False], ids=["dated", "undated"])
def test_the_departure_hour_and_the_speed_run_it_again_when_dated(client, rider, body, dated):
    made = settle(import_gpx(rider[0], io.BytesIO(GPX), {"startDate": FUTURE} if dated else {}).id)
    fresh = pending(patch(client, rider[1], made, body))
    assert "terrain" in fresh and ("daylight" in fresh) is dated
