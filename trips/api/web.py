"""The REST edge wired into the app: /api (trips, days, sharing, the OpenAPI document), the public share pages,
and the operators' endpoints (/healthz, /readyz, /metrics)."""
from flask import Flask

from trips.api import openapi, ops, rider, share, stages, trips


def init_app(app: Flask) -> None:
    for blueprint in (trips.bp, stages.bp, share.api, share.pages, rider.api, rider.pages, ops.bp, openapi.bp):
        app.register_blueprint(blueprint)
