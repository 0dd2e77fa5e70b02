"""The command-line edge of trips: `flask trips import`, `flask purge` (trips.py) and `flask osm` (osm.py)."""
