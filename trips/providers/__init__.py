"""Third-party providers: one hardened HTTP client (http.py) and one Redis cache (cache.py) under small modules
for the route services (routes.py: Komoot, Strava, RideWithGPS), Valhalla, Nominatim and Open-Meteo; their
configuration, built once from the app's (settings.py)."""
