"""The results database's tables (SQLAlchemy Core), as the newest migration leaves them.

Migrations (``tokenmark/store/migrations/versions``) are the source of truth for the
database's shape; this module is what the code reads and writes through, and a test
checks that the two agree (Alembic's ``compare_metadata`` finds no difference on SQLite
and PostgreSQL).

Tables:

* ``results``: one row per result, published or one of the user's runs; the columns of
  :class:`~tokenmark.resultrows.ResultRow`, plus ``total_accelerators`` and
  ``accelerators_used`` stored for queries. ``natural_key`` (unique) identifies a
  result across imports; ``label`` says ``official`` or ``unverified``; ``source``
  what it was read from (``logs``, ``summary table``, ``run``: migration 0003).
* ``systems``: each system description as published (the whole JSON), cited by
  ``results.system_ref``.
* ``runs`` and ``findings``: a run's settings, summary, verdicts (whole, as JSON) and
  each finding as a row; ``results.run_ref`` cites the run.
* ``signatures``: who signed a run's result bundle (``run_hash`` is the SHA-256 of its
  results.json, as ``runs.run_hash``), with the signing key's id and whether the
  signature was verified against a trusted key when it was stored.
* ``accuracy_results``: the scores of an accuracy-mode run (one row per metric, with
  the round's target and whether it was met); such a run has no ``results`` row.
  ``results.tokenmark_value`` is tokenmark's own figure beside LoadGen's ``value`` for a
  run the official LoadGen drove.
* ``series`` and ``series_points`` (migration 0006): a sweep, find-peak search or
  scaling run (its ``index.json`` whole) and its points, each citing the run it measured
  by ``run_hash``.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["accuracy_results", "findings", "metadata", "results", "runs", "series",
           "series_points", "signatures", "systems"]

metadata = sa.MetaData()

systems = sa.Table(
    "systems", metadata,
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

runs = sa.Table(
    "runs", metadata,
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

findings = sa.Table(
    "findings", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("verdict", sa.String(16), nullable=False),
    sa.Column("rule", sa.Text, nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
    sa.Column("observed", sa.Text, nullable=False),
    sa.Column("required", sa.Text, nullable=False),
    sa.Column("advice", sa.Text, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("level", sa.String(8), nullable=False, server_default="fail"),
)

results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("natural_key", sa.Text, nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("label", sa.String(16), nullable=False),
    sa.Column("round", sa.String(16), nullable=False, index=True),
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
    sa.Column("tokenmark_value", sa.Double, nullable=True),
    sa.Column("source", sa.String(16), nullable=False, server_default="logs"),
    sa.Column("host_processor", sa.Text, nullable=False, server_default=""),
    sa.Column("host_processors_per_node", sa.Integer, nullable=True),
    sa.Column("published_unit", sa.String(32), nullable=False, server_default=""),
    sa.Column("quirks", sa.Text, nullable=False, server_default=""),
    sa.Column("table_value", sa.Double, nullable=True),
    sa.Index("ix_results_benchmark_scenario", "benchmark", "scenario"),
)

accuracy_results = sa.Table(
    "accuracy_results", metadata,
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

signatures = sa.Table(
    "signatures", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_hash", sa.String(64), nullable=False, index=True),
    sa.Column("key_id", sa.String(64), nullable=False),
    sa.Column("signer", sa.Text, nullable=False),
    sa.Column("signed_utc", sa.String(40), nullable=False),
    sa.Column("verified", sa.Boolean, nullable=False),
    sa.Column("bundle_sha256", sa.String(64), nullable=False),
    sa.UniqueConstraint("run_hash", "key_id", name="uq_signatures_run_key"),
)

series = sa.Table(
    "series", metadata,
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

series_points = sa.Table(
    "series_points", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("run_hash", sa.String(64), nullable=True, index=True),
    sa.Column("data", sa.JSON, nullable=False),
    sa.UniqueConstraint("series_id", "position", name="uq_series_points_position"),
)
