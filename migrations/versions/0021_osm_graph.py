"""osm: the routable network prepared for the router's search, stored in the database (osm_graph)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 06:00:00

The router searches a graph of the whole network held in memory (trips/osm/graph.py) rather than the edges of a band
read per leg. Imports made before this revision have no prepared graph: the router prepares theirs on first use.
"""
from alembic import op
import sqlalchemy as sa


revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('osm_graph',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('area_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('token', sa.String(length=32), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['area_id'], ['osm_area.id']),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('area_id', 'seq', name='uq_osm_graph_area_seq')
    )


def downgrade():
    op.drop_table('osm_graph')
