"""Borders (docs/RULES.md "Crossings"): the checkpoints are the first day's start and every day's end;
when the country (imported admin_level=2 boundaries) changes between two consecutive checkpoints, the day
that ends in the new country says so. The country is stored as its ISO code (rendered as a name on read);
a checkpoint in no imported country (the sea, an extract without boundaries) changes nothing."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.crossings import BORDER_CROSSING
from trips.enrich.contract import AlertFact, StageSnap, TripSnap
from trips.osm import queries as Q

NAME = "border_crossing"
GROUP = "border_crossing"


def _owners(line, engine) -> list[tuple[str | None, str | None] | None]:
    """(iso, name) of the country each point of `line` lies in, or None."""
    owners: list = [None] * len(line)
    for run in Q.countries_along(line, engine=engine):
        for i in range(run.start_index, run.end_index + 1):
            owners[i] = (run.iso, run.name)
    return owners


def compute(snap: TripSnap, engine):
    result, cover = C.start(snap, engine)
    if not result.covered or not snap.stages:
        return result
    checkpoints = [snap.stages[0].start, *(s.end for s in snap.stages)]
    owners = _owners(checkpoints, engine)
    last = owners[0]
    for k, stage in enumerate(snap.stages, start=1):
        here = owners[k]
        if cover[stage.id] > 0:
            result.ran_on(stage.id)
            if here is not None and last is not None and here != last:
                result.add(AlertFact(BORDER_CROSSING.code, stage.id, {"country": here[0] or here[1]},
                                     _crossing(stage, here, engine)))
        if here is not None:
            last = here
    return result


def _crossing(stage: StageSnap, country, engine) -> dict:
    """Navigate to the day's first vertex in the new country (its end when the line never enters it)."""
    line = stage.line
    for i, owner in enumerate(_owners(line, engine)):
        if owner == country:
            return C.navigate(*line[i])
    return C.navigate(*stage.end)
