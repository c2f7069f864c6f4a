"""Series of runs (issue 27): a sweep, find-peak search or scaling run is stored as a
``series`` (its ``index.json`` whole) with one ``series_points`` row per point, each
citing the run it measured by ``run_hash`` (the runs themselves are ``runs`` rows, as
every ``tokenmark run``). Existing tables and rows are not touched.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "series",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("series_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("started_utc", sa.String(40), nullable=False),
        sa.Column("round", sa.String(16), nullable=False),
        sa.Column("benchmark", sa.Text, nullable=False),
        sa.Column("scenario", sa.String(32), nullable=False),
        sa.Column("doc", sa.JSON, nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
    )
    op.create_table(
        "series_points",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("run_hash", sa.String(64), nullable=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.UniqueConstraint("series_id", "position", name="uq_series_points_position"),
    )
    op.create_index("ix_series_points_run_hash", "series_points", ["run_hash"])


def downgrade() -> None:
    op.drop_table("series_points")
    op.drop_table("series")
