"""Local OpenStreetMap data: the import (`flask osm import`, trips/cli/osm.py), its tables and spatial index, and the
queries the route-side enrichments call. Nothing here talks to a third party."""
