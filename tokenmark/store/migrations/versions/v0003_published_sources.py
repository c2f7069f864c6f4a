"""Published results from two sources: where each row was read from, host processors,
the official table's unit, quirks and figure (issue 22).

Existing rows become ``source = 'logs'`` (published rows were read from result trees)
or ``'run'`` (the user's runs); the new text columns start empty, the numbers unknown.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COLUMNS = ("source", "host_processor", "host_processors_per_node", "published_unit",
            "quirks", "table_value")


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("source", sa.String(16), nullable=False,
                                   server_default="logs"))
        batch.add_column(sa.Column("host_processor", sa.Text, nullable=False,
                                   server_default=""))
        batch.add_column(sa.Column("host_processors_per_node", sa.Integer, nullable=True))
        batch.add_column(sa.Column("published_unit", sa.String(32), nullable=False,
                                   server_default=""))
        batch.add_column(sa.Column("quirks", sa.Text, nullable=False, server_default=""))
        batch.add_column(sa.Column("table_value", sa.Double, nullable=True))
    results = sa.table("results", sa.column("kind", sa.String), sa.column("source", sa.String))
    op.execute(results.update().where(results.c.kind == "run").values(source="run"))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
