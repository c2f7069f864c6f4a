"""Signatures: who signed each result (tokenmark bundle / tokenmark verify).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signatures",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("signer", sa.Text, nullable=False),
        sa.Column("signed_utc", sa.String(40), nullable=False),
        sa.Column("verified", sa.Boolean, nullable=False),
        sa.Column("bundle_sha256", sa.String(64), nullable=False),
        sa.UniqueConstraint("run_hash", "key_id", name="uq_signatures_run_key"),
    )
    op.create_index("ix_signatures_run_hash", "signatures", ["run_hash"])


def downgrade() -> None:
    op.drop_table("signatures")
