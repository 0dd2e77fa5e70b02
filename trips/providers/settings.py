"""Each third-party provider's config, built once from the app's configuration in create_app (`init_app`), and read
with `configs()`."""
from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, current_app

from trips.providers.nominatim import GeocodeConfig
from trips.providers.openmeteo import WeatherConfig
from trips.providers.routes import SourceConfig
from trips.providers.valhalla import RoutingConfig


@dataclass
class Providers:
    routes: SourceConfig
    valhalla: RoutingConfig
    nominatim: GeocodeConfig
    openmeteo: WeatherConfig


def init_app(app: Flask) -> None:
    conf = app.config
    app.extensions["btp_providers"] = Providers(
        routes=SourceConfig(komoot_url=conf["BTP_KOMOOT_URL"], strava_url=conf["BTP_STRAVA_URL"],
                            ridewithgps_url=conf["BTP_RIDEWITHGPS_URL"]),
        valhalla=RoutingConfig(valhalla_url=conf["BTP_VALHALLA_URL"]),
        nominatim=GeocodeConfig(nominatim_url=conf["BTP_NOMINATIM_URL"]),
        openmeteo=WeatherConfig(openmeteo_url=conf["BTP_OPENMETEO_URL"]),
    )


def configs() -> Providers:
    """The current app's provider configs (built by init_app)."""
    return current_app.extensions["btp_providers"]
