"""Fords (docs/RULES.md "Crossings"): a ford within 25 m of a riding day's line, each given to the
day passing closest; one alert per day, pointing at its first ford. Cascaded after weather: a ford is wet (a
warning) when the day's forecast precipitation probability is ≥ 50 %, dry (a nudge) under it or with no
forecast (an undated trip, a day beyond the horizon, the weather service down)."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.crossings import FORD_CROSSING_DRY, FORD_CROSSING_WET
from trips.enrich.contract import AlertFact, TripSnap

NAME = "fords"
GROUP = "ford"

CORRIDOR_M = 25.0
WET_PROBABILITY = 50.0  # precipitation probability (%) from which a ford counts as wet


def compute(snap: TripSnap, engine, forecast: dict[str, float | None] | None = None):
    """`forecast` maps a day's id to its precipitation probability in percent (None or absent: no weather);
    by default it is read from each day's forecast in the snapshot (`StageSnap.weather`)."""
    if forecast is None:
        forecast = {s.id: s.weather.get("precipitationProbability") for s in snap.stages if s.weather}
    result, cover = C.start(snap, engine)
    if not result.covered:
        return result
    riding = [s for s in snap.stages if not s.is_rest_day and cover[s.id] > 0]
    assigned = C.assign_along(riding, CORRIDOR_M, ["ford"], engine)
    for stage in snap.stages:
        if cover[stage.id] <= 0:
            continue
        result.ran_on(stage.id)
        fords = assigned.get(stage.id, [])
        probability = (forecast or {}).get(stage.id)
        if fords and (probability is None or probability < WET_PROBABILITY):
            result.add(AlertFact(FORD_CROSSING_DRY.code, stage.id, {"count": len(fords)},
                                 C.navigate(fords[0].lat, fords[0].lon)))
        elif fords:
            result.add(AlertFact(FORD_CROSSING_WET.code, stage.id,
                                 {"count": len(fords), "precipitationProbability": float(probability)},
                                 C.navigate(fords[0].lat, fords[0].lon)))
    return result
