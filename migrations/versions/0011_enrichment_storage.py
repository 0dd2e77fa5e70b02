"""enrichment storage: alert facts per group and per-day enrichment data on stages, trip.out_of_zone

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 09:30:00

`stage.alerts_by_group` is {group: [fact]} (docs/RULES.md "Enrichment storage": absent = never ran, [] = ran, found
nothing); `stage.enrichment` is {field: value} for the per-day data the enrichments own (resupply, terrain,
labels …), each enrichment replacing only its own fields; `trip.out_of_zone` says the route leaves the
imported map areas (docs/RULES.md "Map coverage").
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('stage', schema=None) as batch_op:
        batch_op.add_column(sa.Column('alerts_by_group', sa.JSON(), server_default='{}', nullable=False))
        batch_op.add_column(sa.Column('enrichment', sa.JSON(), server_default='{}', nullable=False))
    with op.batch_alter_table('trip', schema=None) as batch_op:
        batch_op.add_column(sa.Column('out_of_zone', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade():
    with op.batch_alter_table('trip', schema=None) as batch_op:
        batch_op.drop_column('out_of_zone')
    with op.batch_alter_table('stage', schema=None) as batch_op:
        batch_op.drop_column('enrichment')
        batch_op.drop_column('alerts_by_group')
