"""The streets place search finds and a day's label may name (docs/RULES.md "Place search"). Once an import has
written its roads, the named ones are read back into osm_place: one row per name and cell of CELL_DEG (about 2 km),
so a street of many ways is one row and the streets of one name in other towns are others, at the middle vertex of
the street's longest way in that cell."""
from __future__ import annotations

from array import array

import sqlalchemy as sa

from trips.core.text import normalise, normalise_lines
from trips.osm import geometry
from trips.osm.tables import NAMED_RANKS

CELL_DEG = 0.02
_IDS_PER_READ = 2000
COLS = ("area_id", "osm_type", "osm_id", "name", "name_key", "place", "rank", "population", "lat", "lon")


def _cell(dialect: str, low: str, high: str) -> str:
    """The cell number of a box's centre along one axis (shifted positive, so a cast floors it on SQLite)."""
    centre = f"(({low} + {high}) / 2 + 180) / {CELL_DEG}"
    return f"floor({centre})" if dialect == "postgresql" else f"CAST({centre} AS INTEGER)"


def rows(engine: sa.Engine, area_id: int, pg: bool, batch: int):
    """The street rows of import `area_id` (COLS, then the EWKT point on PostgreSQL), `batch` at most at a time."""
    dialect = engine.dialect.name
    cells = f"{_cell(dialect, 'min_lat', 'max_lat')}, {_cell(dialect, 'min_lon', 'max_lon')}"
    chosen = sa.text(f"SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY name, {cells} ORDER BY length_m "
                     "DESC, id) AS n FROM osm_way WHERE area_id = :a AND name IS NOT NULL) c WHERE n = 1 ORDER BY id")
    lines = sa.text("SELECT osm_id, name, line FROM osm_way WHERE id IN :ids").bindparams(
        sa.bindparam("ids", expanding=True))
    with engine.connect() as conn:  # the window sorts ids and names; the chosen ways' lines are read by id after
        ids = array("q", conn.execute(chosen, {"a": area_id}).scalars())
    out: list[tuple] = []
    for at in range(0, len(ids), _IDS_PER_READ):
        with engine.connect() as conn:
            found = conn.execute(lines, {"ids": ids[at:at + _IDS_PER_READ].tolist()}).all()
        keys = normalise_lines("\n".join(name.replace("\n", " ") for _, name, _ in found)).split("\n")
        if len(keys) != len(found):  # a Unicode mapping made or swallowed a line break: one name at a time
            keys = [normalise(name) for _, name, _ in found]
        for (osm_id, name, _), key, coords in zip(found, keys, geometry.decode_many([line for _, _, line in found])):
            key = key[:255]
            if not key:
                continue
            lat, lon = (float(v) for v in coords[len(coords) // 2])
            row = (area_id, "w", osm_id, name[:255], key, "street", NAMED_RANKS["street"], None, lat, lon)
            out.append(row + (geometry.ewkt_point(lat, lon),) if pg else row)
        if len(out) >= batch:
            yield out
            out = []
    if out:
        yield out
