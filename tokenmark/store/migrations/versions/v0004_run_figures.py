"""Runs: LoadGen's figure beside tokenmark's, accuracy runs as accuracy results.

``results.tokenmark_value`` holds tokenmark's own figure of a run the official LoadGen
drove (its ``value`` is LoadGen's). ``accuracy_results`` holds the scores of an
accuracy-mode run, which has no performance row: the rows earlier versions stored for
such runs (their "throughput" is not a result) are deleted here; the runs themselves and
their findings stay.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("tokenmark_value", sa.Double, nullable=True))
    op.create_table(
        "accuracy_results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("lower_bound", sa.Double, nullable=True),
        sa.Column("upper_bound", sa.Double, nullable=True),
        sa.Column("passed", sa.Boolean, nullable=True),
        sa.UniqueConstraint("run_id", "metric", name="uq_accuracy_results_run_metric"),
    )
    op.execute("DELETE FROM results WHERE run_ref IN "
               "(SELECT id FROM runs WHERE mode = 'AccuracyOnly')")


def downgrade() -> None:
    op.drop_table("accuracy_results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("tokenmark_value")
