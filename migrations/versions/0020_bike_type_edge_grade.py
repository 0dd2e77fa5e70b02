"""trips: a bike type; osm: each edge's surface class

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 06:00:00

The bike a trip is ridden on weighs the router's choice of surfaces and sets how much unpaved road a day may hold
before an alert (docs/RULES.md "Surfaces and way types"); the router reads each edge's surface class beside its
costs. Existing trips are touring trips; edges imported before say nothing of their surface (0, unknown) until the
region is imported again.
"""
from alembic import op
import sqlalchemy as sa


revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade():
    # not batches: rebuilding osm_edge would drop SQLite's R*Tree delete trigger
    op.add_column('trip', sa.Column('bike_type', sa.String(16), nullable=False, server_default='touring'))
    op.add_column('osm_edge', sa.Column('grade', sa.SmallInteger(), nullable=False, server_default='0'))


def downgrade():
    op.drop_column('osm_edge', 'grade')
    op.drop_column('trip', 'bike_type')
