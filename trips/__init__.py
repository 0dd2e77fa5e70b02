"""The trips domain: models, validation, services, pacing, route sources, and its REST blueprint."""
from flask import Flask


def init_app(app: Flask) -> None:
    from trips import models  # noqa: F401  (tables known to migrations)
    from trips.api import trips as api, share as api_share, stages as api_stages, openapi
    from trips import providers
    from trips.core import ops, problems
    from trips.cli import purge_command, trips_cli

    app.register_blueprint(api.bp)
    app.register_blueprint(api_stages.bp)
    app.register_blueprint(api_share.api)
    app.register_blueprint(api_share.pages)
    app.register_blueprint(ops.bp)
    app.register_blueprint(openapi.bp)
    problems.register(app)
    providers.init_app(app)  # each provider's config, built once
    app.cli.add_command(trips_cli)
    app.cli.add_command(purge_command)
