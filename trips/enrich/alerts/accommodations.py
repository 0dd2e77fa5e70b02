"""Accommodation alerts (docs/RULES.md "Alert catalogue"): every lodging found near a day's end may be
closed on that day's date (seasonality, docs/RULES.md "Accommodations")."""
from trips.enrich.alerts.catalogue import register

ACCOMMODATION_SEASONAL_CLOSURE = register(
    "accommodation_seasonal_closure", "warning", "accommodations",
    "All detected accommodations on stage {stage} may be closed during this period.", ("count",))
