"""Resupply alerts (docs/RULES.md "Alert catalogue"): a long day with nowhere to buy food, or shops that would all
be closed when the rider passes them."""
from trips.enrich.alerts.catalogue import register

RESUPPLY_NONE_ON_STAGE = register(
    "resupply_none_on_stage", "nudge", "pois",
    "No restaurant or food shop detected on stage {stage}. Pack provisions.")
RESUPPLY_NONE_IN_COVERED = register(
    "resupply_none_in_covered", "nudge", "pois",
    "No restaurant or food shop detected on the {covered} km of stage {stage} the imported map covers; the rest "
    "is unknown. Pack provisions.", ("covered",))
RESUPPLY_CLOSED_AT_PASSAGE = register(
    "resupply_closed_at_passage", "warning", "pois",
    "Shops exist on stage {stage}, but you would pass them outside typical opening hours.", ("count",))
