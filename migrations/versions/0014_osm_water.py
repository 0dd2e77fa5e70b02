"""osm: water under the share page's map (coastlines, lakes and riverbanks as rings, rivers and canals)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 17:30:00

Imports made before this revision have no water rows: their maps draw roads and towns only until the region is
imported again (`flask osm import`).
"""
from alembic import op
import sqlalchemy as sa


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('osm_water',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('area_id', sa.Integer(), nullable=False),
    sa.Column('osm_type', sa.String(length=1), nullable=False),
    sa.Column('osm_id', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('length_m', sa.Float(), nullable=False),
    sa.Column('line', sa.Text(), nullable=False),
    *(sa.Column(c, sa.Float(), nullable=False) for c in ('min_lat', 'min_lon', 'max_lat', 'max_lon')),
    sa.ForeignKeyConstraint(['area_id'], ['osm_area.id']),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_osm_water_area', 'osm_water', ['area_id'], unique=False)

    from trips.osm.store import install_spatial

    install_spatial(op.get_bind(), required=False, tables=('osm_water',))


def downgrade():
    from trips.osm.store import drop_spatial

    drop_spatial(op.get_bind(), tables=('osm_water',))
    op.drop_index('ix_osm_water_area', table_name='osm_water')
    op.drop_table('osm_water')
