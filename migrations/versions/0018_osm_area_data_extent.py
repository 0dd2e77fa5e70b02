"""osm: every imported area answers for its data's extent too (the header's box widened to the roads it kept)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 03:00:00

An import answered for its file's header box alone, so a road the file held beyond that box was kept and then
refused ("no map data covers this point"). The import now joins the header's box and the extent of the roads,
ferries, edges, points and places it kept (docs/RULES.md "Map coverage"); the areas imported before get the same
box here, from their rows, and `bbox_source` "union" where it grew. Going down leaves the wider boxes: the earlier
code reads them as it reads any box, and the header's box is not kept anywhere to go back to.
"""
from alembic import op
import sqlalchemy as sa


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

_LINES = ('osm_way', 'osm_ferry', 'osm_edge')  # tables with a box per row
_POINTS = ('osm_point', 'osm_place')  # tables with a point per row


def upgrade():
    conn = op.get_bind()
    areas = conn.execute(sa.text("SELECT id, min_lat, min_lon, max_lat, max_lon, bbox_source FROM osm_area "
                                 "WHERE status = 'ready' AND min_lat IS NOT NULL")).all()
    for area_id, *box, source in areas:
        grown = list(box)
        parts = [f"SELECT min(min_lat), min(min_lon), max(max_lat), max(max_lon) FROM {t} WHERE area_id = :a"
                 for t in _LINES]
        parts += [f"SELECT min(lat), min(lon), max(lat), max(lon) FROM {t} WHERE area_id = :a" for t in _POINTS]
        for south, west, north, east in conn.execute(sa.text(" UNION ALL ".join(parts)), {"a": area_id}):
            if south is not None:
                grown = [min(grown[0], south), min(grown[1], west), max(grown[2], north), max(grown[3], east)]
        if grown != list(box):
            conn.execute(sa.text("UPDATE osm_area SET min_lat = :s, min_lon = :w, max_lat = :n, max_lon = :e, "
                                 "bbox_source = :src WHERE id = :a"),
                         {"s": grown[0], "w": grown[1], "n": grown[2], "e": grown[3], "a": area_id,
                          "src": "union" if source == "header" else source})


def downgrade():
    pass  # the wider boxes stay (see above)
