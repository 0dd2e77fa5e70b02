"""trips planned from places: the points a trip was created from, and how each leg of its route was drawn

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 23:50:00

A trip created from `waypoints` (create_trip, POST /api/trips) instead of a route link keeps its points in
trip.source_points ([[lat, lon], ...]); its route, drawn by BTP's router, keeps each leg's account in
trip.route_legs (routed on the map or joined straight, and why). Both are null for every other trip.
"""
from alembic import op
import sqlalchemy as sa


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('trip', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source_points', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('route_legs', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('trip', schema=None) as batch_op:
        batch_op.drop_column('route_legs')
        batch_op.drop_column('source_points')
