"""osm: map tables (points, ways, ferries, places, boundaries, imported areas) and their spatial index

Revision ID: 0010
Revises: 0003
Create Date: 2026-12-01 08:40:00

The spatial index is engine-specific (trips/osm/store.py install_spatial): R*Tree virtual tables on
SQLite; on PostgreSQL a PostGIS geometry column with a GiST index, skipped (the migration still succeeds)
where PostGIS is not installed: `flask osm import` then refuses and says what to install.
"""
import logging

from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0003'
branch_labels = None
depends_on = None

_BBOX = ('min_lat', 'min_lon', 'max_lat', 'max_lon')
_SPATIAL = ('osm_point', 'osm_way', 'osm_ferry', 'osm_place', 'osm_boundary')  # this revision's (later ones add theirs)


def _common(*columns):
    return (
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('area_id', sa.Integer(), nullable=False),
        sa.Column('osm_type', sa.String(length=1), nullable=False),
        sa.Column('osm_id', sa.BigInteger(), nullable=False),
        *columns,
        sa.ForeignKeyConstraint(['area_id'], ['osm_area.id']),
        sa.PrimaryKeyConstraint('id'),
    )


def _line():
    return (
        sa.Column('name', sa.String(length=255), nullable=True),
        sa.Column('length_m', sa.Float(), nullable=False),
        sa.Column('line', sa.Text(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=False) for c in _BBOX),
    )


def upgrade():
    op.create_table('osm_area',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('source_file', sa.String(length=255), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('bbox_source', sa.String(length=8), nullable=True),
    *(sa.Column(c, sa.Float(), nullable=True) for c in _BBOX),
    sa.Column('counts', sa.JSON(), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('imported_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_osm_area_name_status', 'osm_area', ['name', 'status'], unique=False)
    op.create_table('osm_point', *_common(
        sa.Column('kind', sa.String(length=24), nullable=False),
        sa.Column('subkind', sa.String(length=32), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=True),
        sa.Column('lat', sa.Float(), nullable=False),
        sa.Column('lon', sa.Float(), nullable=False),
        sa.Column('tags', sa.JSON(), nullable=False),
        sa.Column('tag_count', sa.Integer(), nullable=False),
    ))
    op.create_table('osm_way', *_common(
        sa.Column('highway', sa.String(length=32), nullable=False),
        sa.Column('surface', sa.String(length=64), nullable=True),
        *(sa.Column(c, sa.String(length=length), nullable=True) for c, length in (
            ('tracktype', 16), ('smoothness', 32), ('cycleway', 32), ('cycleway_left', 32),
            ('cycleway_right', 32), ('cycleway_both', 32), ('bicycle', 32), ('maxspeed', 32))),
        *_line(),
    ))
    op.create_table('osm_ferry', *_common(*_line()))
    op.create_table('osm_place', *_common(
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('name_key', sa.String(length=255), nullable=False),
        sa.Column('place', sa.String(length=16), nullable=False),
        sa.Column('rank', sa.Integer(), nullable=False),
        sa.Column('population', sa.Integer(), nullable=True),
        sa.Column('lat', sa.Float(), nullable=False),
        sa.Column('lon', sa.Float(), nullable=False),
    ))
    op.create_index('ix_osm_place_name_key', 'osm_place', ['name_key'], unique=False,
                    postgresql_ops={'name_key': 'text_pattern_ops'})
    op.create_table('osm_boundary', *_common(
        sa.Column('iso', sa.String(length=8), nullable=True),
        sa.Column('name', sa.String(length=255), nullable=True),
        sa.Column('rings', sa.Text(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=False) for c in _BBOX),
    ))
    for table in ('osm_point', 'osm_way', 'osm_ferry', 'osm_place', 'osm_boundary'):
        op.create_index(f'ix_{table}_area', table, ['area_id'], unique=False)

    from trips.osm.store import install_spatial

    if not install_spatial(op.get_bind(), required=False, tables=_SPATIAL):
        logging.getLogger('alembic.runtime.migration').warning('PostGIS is not installed here; BTP runs without map data until it is '
            '(apt-get install postgresql-15-postgis-3, then CREATE EXTENSION postgis)')


def downgrade():
    from trips.osm.store import drop_spatial

    drop_spatial(op.get_bind(), tables=_SPATIAL)
    for table in ('osm_boundary', 'osm_place', 'osm_ferry', 'osm_way', 'osm_point'):
        op.drop_index(f'ix_{table}_area', table_name=table)
    op.drop_index('ix_osm_place_name_key', table_name='osm_place')
    for table in ('osm_boundary', 'osm_place', 'osm_ferry', 'osm_way', 'osm_point'):
        op.drop_table(table)
    op.drop_index('ix_osm_area_name_status', table_name='osm_area')
    op.drop_table('osm_area')
