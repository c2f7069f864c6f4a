"""The first schema: results, systems, runs and findings.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "systems",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("natural_key", sa.Text, nullable=False, unique=True),
        sa.Column("round", sa.String(16), nullable=False),
        sa.Column("division", sa.String(16), nullable=False),
        sa.Column("submitter", sa.Text, nullable=False),
        sa.Column("system_id", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("description", sa.JSON, nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("started_utc", sa.String(40), nullable=False),
        sa.Column("tokenmark_version", sa.String(32), nullable=False),
        sa.Column("round", sa.String(16), nullable=False),
        sa.Column("benchmark", sa.Text, nullable=False),
        sa.Column("scenario", sa.String(32), nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("mlperf_validity", sa.String(32), nullable=False),
        sa.Column("tokenmark_validity", sa.String(32), nullable=False),
        sa.Column("profile_note", sa.Text, nullable=False),
        sa.Column("run", sa.JSON, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("verdicts", sa.JSON, nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
    )
    op.create_table(
        "findings",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("observed", sa.Text, nullable=False),
        sa.Column("required", sa.Text, nullable=False),
        sa.Column("advice", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_index("ix_findings_run_id", "findings", ["run_id"])
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("natural_key", sa.Text, nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("label", sa.String(16), nullable=False),
        sa.Column("round", sa.String(16), nullable=False),
        sa.Column("division", sa.String(16), nullable=False),
        sa.Column("category", sa.String(32), nullable=True),
        sa.Column("availability", sa.String(16), nullable=True),
        sa.Column("submitter", sa.Text, nullable=False),
        sa.Column("system_id", sa.Text, nullable=False),
        sa.Column("system_name", sa.Text, nullable=False),
        sa.Column("accelerator_model", sa.Text, nullable=False),
        sa.Column("accelerators_per_node", sa.Integer, nullable=True),
        sa.Column("nodes", sa.Integer, nullable=True),
        sa.Column("total_accelerators", sa.Integer, nullable=True),
        sa.Column("accelerators_stated", sa.Integer, nullable=True),
        sa.Column("accelerators_used", sa.Integer, nullable=True),
        sa.Column("accelerator_note", sa.Text, nullable=False),
        sa.Column("benchmark", sa.Text, nullable=False),
        sa.Column("benchmark_folder", sa.Text, nullable=False),
        sa.Column("scenario", sa.String(32), nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("summary_value", sa.Double, nullable=True),
        sa.Column("validity", sa.String(16), nullable=False),
        sa.Column("inferred", sa.Boolean, nullable=False),
        sa.Column("power_value", sa.Double, nullable=True),
        sa.Column("power_unit", sa.String(16), nullable=True),
        sa.Column("accuracy", sa.JSON, nullable=False),
        sa.Column("weight_data_types", sa.Text, nullable=False),
        sa.Column("framework", sa.Text, nullable=False),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("system_ref", sa.Integer, sa.ForeignKey("systems.id"), nullable=True),
        sa.Column("run_ref", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=True),
    )
    op.create_index("ix_results_round", "results", ["round"])
    op.create_index("ix_results_benchmark_scenario", "results", ["benchmark", "scenario"])


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("findings")
    op.drop_table("runs")
    op.drop_table("systems")
