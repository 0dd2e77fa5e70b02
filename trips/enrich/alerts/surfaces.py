"""The surface alert (docs/RULES.md "Surfaces and way types"): a day rougher than the trip's bike type is for. Rule
in trips/enrich/surfaces.py; `share` is a whole percentage, `length` km as a float."""
from __future__ import annotations

from trips.enrich.alerts.catalogue import register

GROUP = "surface"

SURFACE_BEYOND_BIKE = register(
    "surface_beyond_bike", "warning", GROUP,
    "{share}% of stage {stage} ({length} km) is rougher than the trip's bike type suits. Consider another route "
    "or bike type.", ("share", "length"))
