"""Daylight (docs/RULES.md "Daylight"): on each riding day of a dated trip, whether the estimated arrival comes after
the evening's civil twilight end at the day's end point, compared as instants (docs/RULES.md "Times"), and the
departure hour that would arrive by it. Its own group: its inputs are not terrain's.
"""
from __future__ import annotations

import math
from datetime import date, datetime, timedelta

from astral import Observer
from astral.sun import dusk, noon, sunset

from trips.enrich.alerts.calendar import SUNSET_ARRIVAL_AFTER_TWILIGHT
from trips.enrich.contract import AlertFact, Result, StageSnap, TripSnap
from trips.route import clock
from trips.route.pacing import rider_time

NAME = "daylight"
GROUP = "daylight"
EARLIEST_DEPARTURE_HOUR = 5  # the auto-fix floor: max(5, …)


def _events(event, where: Observer, days, zone) -> list[datetime]:
    found = []
    for day in days:
        try:
            found.append(event(where, day, tzinfo=zone))
        except ValueError:  # the sun never sets, never rises or never goes 6° below the horizon that day
            continue
    return found


def sky(lat: float, lon: float, day: date) -> tuple[datetime, datetime] | None:
    """(sunset, civil twilight end) of the evening of `day` at the point: the first twilight end after that day's
    solar noon, as aware datetimes in the point's zone (past midnight in white nights); None when there is none
    within the next 24 hours (polar day: no dusk) or that evening has no sunset (polar night)."""
    zone = clock.zone_at(lat, lon)
    where = Observer(latitude=lat, longitude=lon)
    after = noon(where, day, tzinfo=zone)
    days = [day + timedelta(days=k) for k in (-1, 0, 1)]
    # astral gives the event nearest each date, which in white nights may fall on the previous night's clock
    # (00:02 for the evening before): the instants are compared, never their clock faces.
    ends = sorted(e for e in _events(dusk, where, days, zone) if e > after)
    if not ends or ends[0] - after > timedelta(hours=24):
        return None
    downs = [d for d in _events(sunset, where, days, zone) if after < d <= ends[0]]
    return (max(downs), ends[0]) if downs else None


def check(snap: TripSnap, stage: StageSnap) -> AlertFact | None:
    """The day's alert, or None (arrival by twilight, polar day or night, no date, a rest day)."""
    if stage.is_rest_day or stage.date is None:
        return None
    timing = rider_time(stage.distance_km, stage.elevation_gain_m, snap.average_speed, snap.departure_hour)
    found = sky(*stage.end, stage.date)
    if found is None:
        return None
    down, twilight = found
    arrival = timing.passage(stage.date, stage.start, where=stage.end)
    if arrival <= twilight:
        return None
    leaving = clock.departure(stage.date, snap.departure_hour, stage.start)
    latest = (twilight - timedelta(hours=timing.elapsed_at(stage.distance_km))).astimezone(leaving.tzinfo)
    hour = max(EARLIEST_DEPARTURE_HOUR, math.floor(clock.hours_since_midnight(latest, stage.date)))
    return AlertFact(SUNSET_ARRIVAL_AFTER_TWILIGHT.code, stage.id,
                     {"arrival": clock.clock(arrival), "twilight": clock.clock(twilight), "sunset": clock.clock(down)},
                     {"kind": "auto_fix", "departureHour": hour})


def clock_shift(snap: TripSnap, stage: StageSnap) -> int:
    """Minutes the end point's clock is ahead of the start point's at the arrival (a day crossing a time zone):
    the read models add it to the arrival's clock face, so `estimatedArrival` is the end point's local time
    without a time-zone lookup in the web worker (docs/RULES.md "Times"). 0 on a rest day."""
    if stage.is_rest_day or stage.date is None:
        return 0
    timing = rider_time(stage.distance_km, stage.elevation_gain_m, snap.average_speed, snap.departure_hour)
    there, here = timing.passage(stage.date, stage.start, where=stage.end), timing.passage(stage.date, stage.start)
    return round((there.utcoffset() - here.utcoffset()) / timedelta(minutes=1))


def compute(snap: TripSnap, engine) -> Result:
    """Every day of a dated trip looked at; the alert where the arrival is after twilight, and `clockShift` on a day
    whose end point's clock differs from its start's. Needs no map.
    Raises nothing for a day without twilight (polar), only for a broken snapshot."""
    result = Result()
    for stage in snap.stages:
        if stage.date is None:
            continue
        result.ran_on(stage.id)
        shift = clock_shift(snap, stage)
        if shift:
            result.data[stage.id] = {"clockShift": shift}
        fact = check(snap, stage)
        if fact is not None:
            result.add(fact)
    return result
