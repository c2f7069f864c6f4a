"""Findings keep their level (issue 20): ``findings.level`` is ``fail``, ``warn`` or
``info`` (:class:`tokenmark.findings.Finding`); the stored rows dropped it before.

Existing rows take the level their run's ``verdicts`` (the results file's, kept whole in
``runs.verdicts``) gives the same finding (same verdict, rule, observed and required);
a finding the verdicts do not list, or one written before levels existed, is ``fail``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _levels(verdicts: Any) -> dict[tuple[str, str, str, str], str]:
    if isinstance(verdicts, str):
        verdicts = json.loads(verdicts)
    out: dict[tuple[str, str, str, str], str] = {}
    for kind in ("mlperf", "tokenmark"):
        v = verdicts.get(kind) if isinstance(verdicts, dict) else None
        for f in (v.get("findings") or ()) if isinstance(v, dict) else ():
            if isinstance(f, dict) and f.get("level") in ("warn", "info"):
                key = (kind, str(f.get("rule", "")), str(f.get("observed", "")),
                       str(f.get("required", "")))
                out[key] = str(f["level"])
    return out


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("level", sa.String(8), nullable=False,
                                   server_default="fail"))
    conn = op.get_bind()
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("verdicts", sa.JSON))
    findings = sa.table("findings", sa.column("id", sa.Integer),
                        sa.column("run_id", sa.Integer), sa.column("verdict", sa.String),
                        sa.column("rule", sa.Text), sa.column("observed", sa.Text),
                        sa.column("required", sa.Text), sa.column("level", sa.String))
    for run_id, verdicts in conn.execute(sa.select(runs.c.id, runs.c.verdicts)).all():
        levels = _levels(verdicts)
        if not levels:
            continue
        rows = conn.execute(sa.select(findings.c.id, findings.c.verdict, findings.c.rule,
                                      findings.c.observed, findings.c.required)
                            .where(findings.c.run_id == run_id)).all()
        for fid, kind, rule, observed, required in rows:
            level = levels.get((kind, rule, observed, required))
            if level is not None:
                conn.execute(findings.update().where(findings.c.id == fid).values(level=level))


def downgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("level")
