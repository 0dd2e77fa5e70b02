"""Calendar (docs/RULES.md "Calendar"): each day's date against the public holidays of the countries the day's
own line lies in (one across a border the day never reaches shuts nothing on it), else a Sunday. Rest days
included: a shop is shut on a holiday whether one rides or not. Needs no map: without imported boundaries the countries come from trips/enrich/countries.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from trips.enrich.alerts.calendar import CALENDAR_PUBLIC_HOLIDAY, CALENDAR_SUNDAY
from trips.enrich.contract import AlertFact, Result, TripSnap
from trips.enrich.countries import nearest_country
from trips.osm import queries as Q

if TYPE_CHECKING:
    import holidays

NAME = "calendar"
GROUP = "calendar"
SUNDAY = 7  # ISO weekday


def _countries_by_day(snap: TripSnap, engine) -> list[list[str]]:
    """Per day, the ISO codes of the countries its line lies in (in order of the line, each once), the
    geocoder's answer for an end no imported country covers."""
    lines = [[snap.stages[0].start, *s.line] if k == 0 else s.line for k, s in enumerate(snap.stages)]
    points = [p for line in lines for p in line]
    owner: list[str | None] = [None] * len(points)
    for run in Q.countries_along(points, engine=engine):
        for i in range(run.start_index, run.end_index + 1):
            owner[i] = run.iso
    out, at = [], 0
    for line in lines:
        own = owner[at:at + len(line)]
        for i in {0, len(line) - 1}:
            if own[i] is None:
                own[i] = nearest_country(*line[i])
        out.append(list(dict.fromkeys(c for c in own if c)))
        at += len(line)
    return out


def _calendars(countries, years) -> dict[str, holidays.HolidayBase]:
    """{iso: its national public holidays over `years`}; a country the package does not know is left out."""
    import holidays  # loaded by the job that needs it, not by every web worker

    out = {}
    for iso in countries:
        try:
            out[iso] = holidays.country_holidays(iso, years=sorted(years))
        except NotImplementedError:
            continue
    return out


def compute(snap: TripSnap, engine) -> Result:
    """The day's holiday (or Sunday) alert on every dated day. Raises nothing for an unknown country (it has
    no calendar); map query errors propagate (the job fails and says why)."""
    result = Result()
    days = [s for s in snap.stages if s.date is not None]
    if not days:
        return result
    per_day = _countries_by_day(snap, engine)
    calendars = _calendars(dict.fromkeys(c for cs in per_day for c in cs), {s.date.year for s in days})
    for stage, own in zip(snap.stages, per_day, strict=True):
        if stage.date is None:
            continue
        result.ran_on(stage.id)
        fact = None
        for iso in own:
            name = calendars[iso].get(stage.date) if iso in calendars else None
            if name is not None:
                fact = AlertFact(CALENDAR_PUBLIC_HOLIDAY.code, stage.id,
                                 {"holiday": name or "public holiday", "country": iso,
                                  "date": stage.date.isoformat()})
                break
        if fact is None and stage.date.isoweekday() == SUNDAY:
            fact = AlertFact(CALENDAR_SUNDAY.code, stage.id, {"date": stage.date.isoformat()})
        if fact is not None:
            result.add(fact)
    return result
