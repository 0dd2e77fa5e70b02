"""The trips domain, in floors (docs/ARCHITECTURE.md): core → models and errors → route, osm, places, providers →
enrich and services → readmodels → the edges (api, cli). The package itself imports nothing: app.py wires it."""
