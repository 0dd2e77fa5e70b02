"""Wind and the other weather rules (group "wind", docs/RULES.md "Alert catalogue"), cascaded after
weather: they read each day's stored forecast from the snapshot. Rest days are skipped (riding rules); a day
without a forecast is not looked at (its group stays "never ran", not "nothing found").
"""
from __future__ import annotations

from trips.enrich.alerts.weather import (COLD_EXTREME, COMFORT_POOR_CONDITIONS, HEAT_EXTREME, RAIN_HEAVY,
                                         WIND_GUSTS_STRONG, WIND_HEADWIND)
from trips.enrich.contract import AlertFact, Result, TripSnap

NAME = "wind"
GROUP = "wind"

HEADWIND_SPEED_KMH = 25.0   # windSpeed ≥ 25 km/h with a headwind flags a day
HEADWIND_RATIO = 0.6        # flagged on ≥ 60 % of the days with weather: an alert on each flagged day
COMFORT_POOR_MAX = 39       # comfortIndex ≤ 39
HEAT_APPARENT_MIN_C = 32.0  # apparent max ≥ 32 °C
COLD_APPARENT_MAX_C = 2.0   # apparent min ≤ 2 °C
RAIN_HEAVY_MM = 10.0        # window precipitation sum ≥ 10 mm
GUSTS_STRONG_KMH = 50.0     # gusts ≥ 50 km/h


def _at_least(value, threshold) -> bool:
    return value is not None and value >= threshold


def compute(snap: TripSnap, engine) -> Result:
    result = Result()
    days = [s for s in snap.stages if not s.is_rest_day and s.weather]
    flagged = [s for s in days if _at_least(s.weather.get("windSpeed"), HEADWIND_SPEED_KMH)
               and s.weather.get("relativeWindDirection") == "headwind"]
    headwinds = bool(days) and len(flagged) / len(days) >= HEADWIND_RATIO
    for stage in days:
        w = stage.weather
        result.ran_on(stage.id)
        if headwinds and stage in flagged:
            result.add(AlertFact(WIND_HEADWIND.code, stage.id, {
                "count": len(flagged), "total": len(days), "threshold": HEADWIND_SPEED_KMH,
                "windSpeed": w["windSpeed"]}))
        if w.get("comfortIndex") is not None and w["comfortIndex"] <= COMFORT_POOR_MAX:
            result.add(AlertFact(COMFORT_POOR_CONDITIONS.code, stage.id, {"comfortIndex": int(w["comfortIndex"])}))
        if w.get("hourly") and _at_least(w.get("apparentTempMax"), HEAT_APPARENT_MIN_C):
            result.add(AlertFact(HEAT_EXTREME.code, stage.id, {"temperature": float(w["apparentTempMax"])}))
        if w.get("hourly") and w.get("apparentTempMin") is not None and w["apparentTempMin"] <= COLD_APPARENT_MAX_C:
            result.add(AlertFact(COLD_EXTREME.code, stage.id, {"temperature": float(w["apparentTempMin"])}))
        if _at_least(w.get("precipitationMm"), RAIN_HEAVY_MM):
            result.add(AlertFact(RAIN_HEAVY.code, stage.id, {"precipitation": float(w["precipitationMm"])}))
        if _at_least(w.get("windGusts"), GUSTS_STRONG_KMH):
            result.add(AlertFact(WIND_GUSTS_STRONG.code, stage.id, {"gusts": float(w["windGusts"])}))
    return result
