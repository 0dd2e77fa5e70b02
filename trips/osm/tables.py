"""The map tables: what an import of an OpenStreetMap extract keeps (the subset the enrichments read). Every row
belongs to one import (`osm_area`) and the queries read only the rows of a `ready` one, so an import streams in
committed batches without ever exposing half a region. The spatial index differs per engine: trips/osm/store.py
makes it.
"""
from __future__ import annotations

import sqlalchemy as sa

from trips.core.db import db

AREA_STATUSES = ("loading", "ready", "replaced")

osm_area = sa.Table(
    "osm_area", db.metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),  # the region; a new import of the same name replaces it
    sa.Column("source_file", sa.String(255), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("bbox_source", sa.String(8), nullable=True),  # "header" (the file says) or "data" (measured)
    sa.Column("min_lat", sa.Float, nullable=True),
    sa.Column("min_lon", sa.Float, nullable=True),
    sa.Column("max_lat", sa.Float, nullable=True),
    sa.Column("max_lon", sa.Float, nullable=True),
    sa.Column("counts", sa.JSON, nullable=True),  # objects read and rows kept, per kind
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("imported_at", sa.DateTime, nullable=True),  # set when the import became ready
    sa.Index("ix_osm_area_name_status", "name", "status"),
)


def _common(name: str, *columns: sa.Column, indexes: tuple = ()) -> sa.Table:
    return sa.Table(
        name, db.metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("area_id", sa.Integer, sa.ForeignKey("osm_area.id"), nullable=False),
        sa.Column("osm_type", sa.String(1), nullable=False),  # n, w or r
        sa.Column("osm_id", sa.BigInteger, nullable=False),
        *columns,
        sa.Index(f"ix_{name}_area", "area_id"),
        *indexes,
    )


_BBOX = ("min_lat", "min_lon", "max_lat", "max_lon")

# Nodes (and the centre of closed ways) that the enrichments look for near the route.
osm_point = _common(
    "osm_point",
    sa.Column("kind", sa.String(24), nullable=False),  # accommodation, resupply, water, bike_shop, …
    sa.Column("subkind", sa.String(32), nullable=False),  # hotel, supermarket, pharmacy, museum, …
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("lat", sa.Float, nullable=False),
    sa.Column("lon", sa.Float, nullable=False),
    sa.Column("tags", sa.JSON, nullable=False),  # the kept subset (trips/osm/tags.py KEPT_TAGS)
    sa.Column("tag_count", sa.Integer, nullable=False),  # of the OSM object (ranking: docs/RULES.md "Accommodations")
)

def _line() -> tuple[sa.Column, ...]:
    return (
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("length_m", sa.Float, nullable=False),
        sa.Column("line", sa.Text, nullable=False),  # encoded polyline, precision 1e-6 (trips/osm/geometry.py)
        *(sa.Column(c, sa.Float, nullable=False) for c in _BBOX),
    )

# Roads and paths, with the tags terrain reads (docs/RULES.md "Terrain").
osm_way = _common(
    "osm_way",
    sa.Column("highway", sa.String(32), nullable=False),
    sa.Column("surface", sa.String(64), nullable=True),
    sa.Column("tracktype", sa.String(16), nullable=True),
    sa.Column("smoothness", sa.String(32), nullable=True),
    sa.Column("cycleway", sa.String(32), nullable=True),
    sa.Column("cycleway_left", sa.String(32), nullable=True),
    sa.Column("cycleway_right", sa.String(32), nullable=True),
    sa.Column("cycleway_both", sa.String(32), nullable=True),
    sa.Column("bicycle", sa.String(32), nullable=True),
    sa.Column("maxspeed", sa.String(32), nullable=True),
    *_line(),
)

osm_ferry = _common("osm_ferry", *_line())

# What the share page's map draws under the route (trips/osm/basemap.py): coastlines (natural=coastline, the land on
# their left), inland water as closed rings (natural=water, waterway=riverbank) and rivers and canals as lines.
WATER_KINDS = ("coastline", "water", "river")
osm_water = _common("osm_water", sa.Column("kind", sa.String(16), nullable=False), *_line())

PLACE_RANKS = {"city": 1, "town": 2, "village": 3, "hamlet": 4}
# The other named features place search finds and a day's label falls back on (docs/RULES.md "Place search"), by
# their class: parts of a town and islands (their OSM `place`), squares, stations, attractions and streets.
FEATURE_RANKS = {"suburb": 5, "quarter": 6, "neighbourhood": 6, "island": 6, "square": 7, "station": 8,
                 "attraction": 8, "locality": 9, "street": 10}
NAMED_RANKS = {**PLACE_RANKS, **FEATURE_RANKS}

osm_place = _common(
    "osm_place",
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("name_key", sa.String(255), nullable=False),  # trips.core.text.normalise(name)
    sa.Column("place", sa.String(16), nullable=False),  # a class of NAMED_RANKS: city … hamlet, square, street …
    sa.Column("rank", sa.Integer, nullable=False),  # NAMED_RANKS: 1 = city … 4 = hamlet, then the features
    sa.Column("population", sa.Integer, nullable=True),
    sa.Column("lat", sa.Float, nullable=False),
    sa.Column("lon", sa.Float, nullable=False),
    # text_pattern_ops: PostgreSQL serves `LIKE 'prefix%'` from the index whatever the collation.
    indexes=(sa.Index("ix_osm_place_name_key", "name_key", postgresql_ops={"name_key": "text_pattern_ops"}),),
)

# Countries (admin_level=2), their rings simplified to 100 m.
osm_boundary = _common(
    "osm_boundary",
    sa.Column("iso", sa.String(8), nullable=True),  # ISO 3166-1 alpha-2 when the relation carries it
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("rings", sa.Text, nullable=False),  # JSON [[outer?, encoded ring], …] (trips/osm/geometry.py)
    *(sa.Column(c, sa.Float, nullable=False) for c in _BBOX),
)

# The routable network (trips/osm/network.py, docs/RULES.md "Bicycle routing"): `source` and `target` are the OSM
# node ids of an edge's ends, so the edges of every ready import join at the same ids.
osm_edge = _common(
    "osm_edge",
    sa.Column("source", sa.BigInteger, nullable=False),
    sa.Column("target", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # the routing class: cycleway, quiet, primary, ferry, …
    sa.Column("forward", sa.Boolean, nullable=False),  # a bicycle may ride it source → target
    sa.Column("backward", sa.Boolean, nullable=False),  # … and target → source
    sa.Column("length_m", sa.Float, nullable=False),
    sa.Column("line", sa.Text, nullable=False),  # encoded polyline, precision 1e-6 (trips/osm/geometry.py)
    *(sa.Column(c, sa.Float, nullable=False) for c in _BBOX),
    # The search's costs, written by the import (length × the class's cost of a metre; -1: not that way): the
    # router reads plain columns, under pgRouting's names.
    sa.Column("cost", sa.Float, nullable=False),  # source → target
    sa.Column("reverse_cost", sa.Float, nullable=False),  # target → source
    # The surface class (trips/osm/waykinds.py GRADE), which the bike type weighs the costs by when searching.
    sa.Column("grade", sa.SmallInteger, nullable=False, server_default="0"),
)

# The routable network prepared for the search (trips/osm/graph.py): one import's edges as numpy arrays, stored as
# consecutive binary chunks (`seq` 0, 1, …) so every web node and worker loads the same graph from the database.
# `token` is new at every preparation: the instance copies are named after the tokens of the ready imports.
osm_graph = sa.Table(
    "osm_graph", db.metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("area_id", sa.Integer, sa.ForeignKey("osm_area.id"), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("token", sa.String(32), nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.UniqueConstraint("area_id", "seq", name="uq_osm_graph_area_seq"),
)

# The tables with a spatial index, and the shape PostGIS stores for each.
SPATIAL = {"osm_point": "Point", "osm_way": "LineString", "osm_ferry": "LineString",
           "osm_place": "Point", "osm_boundary": "Polygon", "osm_water": "LineString",
           "osm_edge": "LineString"}
DATA_TABLES = tuple(SPATIAL)


def spatial_index_object(name: str) -> bool:
    """True for the engine-specific spatial objects the model does not declare (for migration comparisons):
    the R*Tree virtual tables and their shadow tables, the PostGIS `geom` columns and their GiST indexes."""
    return any(name == f"{t}_rtree" or name.startswith(f"{t}_rtree_") or name == f"ix_{t}_geom"
               for t in DATA_TABLES)
