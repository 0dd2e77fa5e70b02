"""user_account.locale becomes the reader's choice: null until chosen on /account or PATCH /api/users/me

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 10:00:00

Alerts are rendered in the account's locale, else (on REST) the request's Accept-Language, else English
(docs/RULES.md "Rendering at read time"). A locale "en" by default would hide the browser's: null now means
"not chosen". Until this revision nobody could choose, so every stored value is the default and becomes null.
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.alter_column('locale', existing_type=sa.String(length=5), nullable=True)
    op.execute("UPDATE user_account SET locale = NULL")


def downgrade():
    op.execute("UPDATE user_account SET locale = 'en' WHERE locale IS NULL")
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.alter_column('locale', existing_type=sa.String(length=5), nullable=False)
