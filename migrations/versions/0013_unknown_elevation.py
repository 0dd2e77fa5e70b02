"""elevation figures may be unknown: trip_route and stage climbing, descent and end elevations become nullable

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 10:30:00

A route without elevation (a GPX without <ele>, a service whose points carry none) had 0 m of climbing stored:
unknown is now null, never zero (docs/RULES.md "Elevation"). Rows stored before this revision keep their
values (whether a 0 was measured or invented can no longer be told); the downgrade turns nulls back into 0.
"""
from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

_COLUMNS = {'trip_route': ('elevation_gain', 'elevation_loss'),
            'stage': ('elevation', 'elevation_loss', 'start_ele', 'end_ele')}


def upgrade():
    for table, columns in _COLUMNS.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in columns:
                batch_op.alter_column(column, existing_type=sa.Float(), nullable=True)


def downgrade():
    for table, columns in _COLUMNS.items():
        for column in columns:
            op.execute(f"UPDATE {table} SET {column} = 0 WHERE {column} IS NULL")
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in columns:
                batch_op.alter_column(column, existing_type=sa.Float(), nullable=False)
