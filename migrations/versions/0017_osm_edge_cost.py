"""osm: the router's cost of each edge each way, written at import (osm_edge.cost, osm_edge.reverse_cost)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 23:50:00

The router's search read every edge of its band with a cost expression evaluated per row (length × the class's cost
of a metre, per direction): the import now writes both costs, -1 where a bicycle may not ride that way (pgRouting's
names and convention), and the search selects plain columns (docs/RULES.md "Bicycle routing"). Edges imported
before this revision get their costs here, from the same table of costs (trips/osm/network.py COST_PER_METRE); a
change of that table needs a migration that rewrites the two columns (or a new import). SQLite keeps the columns'
default of -1 (dropping a default there rebuilds the table); every import writes both columns.
"""
from alembic import op
import sqlalchemy as sa


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

_COLUMNS = ('cost', 'reverse_cost')


def upgrade():
    from trips.osm.network import COST_PER_METRE  # the table of costs the import writes with

    for column in _COLUMNS:
        op.add_column('osm_edge', sa.Column(column, sa.Float(), nullable=False, server_default='-1'))
    cases = " ".join(f"WHEN '{kind}' THEN {value!r}" for kind, value in COST_PER_METRE.items())
    factor = f"CASE kind {cases} ELSE {COST_PER_METRE['other']!r} END"
    op.execute(f"UPDATE osm_edge SET cost = CASE WHEN forward THEN length_m * {factor} ELSE -1 END, "
               f"reverse_cost = CASE WHEN backward THEN length_m * {factor} ELSE -1 END")
    if op.get_bind().dialect.name == 'postgresql':
        for column in _COLUMNS:
            op.alter_column('osm_edge', column, server_default=None)


def downgrade():
    for column in _COLUMNS:  # not a batch: rebuilding the table would drop SQLite's R*Tree delete trigger
        op.drop_column('osm_edge', column)
