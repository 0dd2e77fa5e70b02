"""osm: the routable network for the bicycle router (osm_edge), and pgRouting where PostgreSQL has it

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 18:00:00

Imports made before this revision have no edges: reroutes there are joined straight (approximate) until the region
is imported again (`flask osm import`).
"""
from alembic import op
import sqlalchemy as sa


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('osm_edge',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('area_id', sa.Integer(), nullable=False),
    sa.Column('osm_type', sa.String(length=1), nullable=False),
    sa.Column('osm_id', sa.BigInteger(), nullable=False),
    sa.Column('source', sa.BigInteger(), nullable=False),
    sa.Column('target', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('forward', sa.Boolean(), nullable=False),
    sa.Column('backward', sa.Boolean(), nullable=False),
    sa.Column('length_m', sa.Float(), nullable=False),
    sa.Column('line', sa.Text(), nullable=False),
    *(sa.Column(c, sa.Float(), nullable=False) for c in ('min_lat', 'min_lon', 'max_lat', 'max_lon')),
    sa.ForeignKeyConstraint(['area_id'], ['osm_area.id']),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_osm_edge_area', 'osm_edge', ['area_id'], unique=False)

    from trips.osm.store import install_spatial
    from trips.osm.router import install_pgrouting

    if install_spatial(op.get_bind(), required=False, tables=('osm_edge',)):
        install_pgrouting(op.get_bind())


def downgrade():
    from trips.osm.store import drop_spatial

    drop_spatial(op.get_bind(), tables=('osm_edge',))
    op.drop_index('ix_osm_edge_area', table_name='osm_edge')
    op.drop_table('osm_edge')
