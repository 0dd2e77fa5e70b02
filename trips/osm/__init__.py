"""Local OpenStreetMap data: the import (`flask osm import`, trips/cli/osm.py), its tables and spatial index, the
queries the enrichments call and the bicycle router. Nothing here talks to a third party."""
