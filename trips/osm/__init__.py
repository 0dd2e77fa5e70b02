"""Local OpenStreetMap data: the import (`flask osm import`), its tables and spatial index, and the queries
the route-side enrichments call. Nothing here talks to a third party."""
from flask import Flask


def init_app(app: Flask) -> None:
    from trips.osm import tables  # noqa: F401  (tables known to migrations)
    from trips.osm.cli import osm_cli

    app.cli.add_command(osm_cli)
