"""Weather alerts, group "wind" (docs/RULES.md "Alert catalogue"): raised by trips/enrich/wind.py from the forecast of
trips/enrich/weather.py. Parameters are stored raw: km/h, °C and mm as floats, the comfort index as an int.
"""
from __future__ import annotations

from trips.enrich.alerts.catalogue import register

GROUP = "wind"

WIND_HEADWIND = register(
    "wind_headwind", "warning", GROUP,
    "Headwinds expected for {count}/{total} stages (≥{threshold} km/h). Plan shorter days or earlier starts.",
    ("count", "total", "threshold", "windSpeed"))
COMFORT_POOR_CONDITIONS = register(
    "comfort_poor_conditions", "warning", GROUP,
    "Poor cycling conditions on stage {stage} (comfort index {comfortIndex}/100).", ("comfortIndex",))
HEAT_EXTREME = register(
    "heat_extreme", "warning", GROUP,
    "Extreme heat on stage {stage}: feels like up to {temperature}°C. Carry extra water and avoid midday.",
    ("temperature",))
COLD_EXTREME = register(
    "cold_extreme", "warning", GROUP,
    "Extreme cold on stage {stage}: feels like down to {temperature}°C. Pack warm layers.", ("temperature",))
RAIN_HEAVY = register(
    "rain_heavy", "warning", GROUP,
    "Heavy rain expected on stage {stage}: {precipitation} mm while riding. Pack rain gear.", ("precipitation",))
WIND_GUSTS_STRONG = register(
    "wind_gusts_strong", "warning", GROUP,
    "Strong gusts on stage {stage}: up to {gusts} km/h. Take care on exposed sections.", ("gusts",))
