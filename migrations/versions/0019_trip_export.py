"""trip_export: each export file of a trip (GPX, FIT, …) kept per version of the trip, made once

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 06:00:00

A download made the file again on every request (a long trip's FIT course took seconds of CPU), on every web node.
The file is now kept in the database, which every node shares, under the trip's version, the export's kind, options
and language; a newer version of the trip replaces its older files. Going down drops the table: the files are
made again when asked.
"""
from alembic import op
import sqlalchemy as sa


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'trip_export',
        sa.Column('trip_id', sa.String(length=36), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('options', sa.String(length=80), nullable=False),
        sa.Column('language', sa.String(length=8), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('etag', sa.String(length=64), nullable=False),
        sa.Column('media_type', sa.String(length=64), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.Column('content', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['trip_id'], ['trip.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('trip_id', 'kind', 'options', 'language', 'version'),
    )


def downgrade():
    op.drop_table('trip_export')
