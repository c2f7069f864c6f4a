"""The results database (an edge): SQLAlchemy 2 + Alembic, SQLite by default, PostgreSQL by URL.

:class:`Store` is the whole surface the rest of tokenmark uses: open a database
(creating a new one at the newest schema), write an import in one transaction, read
rows back for the analyses, and say what it holds. SQL stays in this package; rows go
in and out as :class:`~tokenmark.resultrows.ResultRow` and
:class:`~tokenmark.resultrows.RunRecord`. See :mod:`tokenmark.store.engine` for where
the database lives and how concurrent writers are handled, and
:mod:`tokenmark.store.writer` for idempotence.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType

import sqlalchemy as sa

from tokenmark.resultrows import ResultRow, RunRecord, SeriesRecord, SystemRecord
from tokenmark.store import engine as _engine
from tokenmark.store.reader import (
    Filters,
    counts,
    fingerprint,
    load_rows,
    load_runs,
    load_series,
)
from tokenmark.store.writer import WriteCounts, write

__all__ = ["Store", "WriteCounts"]


class Store:
    """One results database. Use as a context manager, or call :meth:`close`."""

    def __init__(self, engine: sa.Engine, upgraded_from: str | None = None) -> None:
        self.engine = engine
        #: The schema revision the user's default database was at before opening it
        #: upgraded it (``None``: no upgrade happened).
        self.upgraded_from = upgraded_from

    @classmethod
    def open(cls, db: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
        """Open ``db`` (path or URL; ``None``: ``$TOKENMARK_DB`` or the default file).

        A new database is created at the newest schema when ``create``; one at an older
        schema raises :class:`~tokenmark.errors.StoreError` naming ``tokenmark db upgrade``,
        except the user's default local file (``db`` and ``$TOKENMARK_DB`` unset), which
        is upgraded (:attr:`upgraded_from` says from which revision). A database the user
        named is never migrated without their command.
        """
        default = db is None and not os.environ.get(_engine.DB_ENV)
        eng = _engine.create(_engine.resolve_url(db))
        try:
            was = _engine.ensure_schema(eng, create_missing=create, auto_upgrade=default)
        except BaseException:
            eng.dispose()
            raise
        return cls(eng, was)

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def write(self, rows: Sequence[ResultRow], runs: Sequence[RunRecord] = (),
              systems: Sequence[SystemRecord] = (),
              series: Sequence[SeriesRecord] = ()) -> WriteCounts:
        """Store rows, runs, systems and series of runs in one transaction (retried if it
        lost a race)."""

        def tx() -> WriteCounts:
            with self.engine.connect() as conn:
                conn.execution_options(tokenmark_write=True)
                with conn.begin():
                    return write(conn, rows, runs, systems, series)

        return _engine.retrying(tx)

    def rows(self, filters: Filters | None = None) -> list[ResultRow]:
        with self.engine.connect() as conn:
            return load_rows(conn, filters)

    def runs(self, filters: Filters | None = None,
             run_hash: str | None = None) -> list[RunRecord]:
        """The user's runs (newest first); ``run_hash`` a full hash or a prefix."""
        with self.engine.connect() as conn:
            return load_runs(conn, filters, run_hash)

    def series(self, series_hash: str | None = None) -> list[SeriesRecord]:
        """The user's sweeps, find-peak searches and scaling runs (newest first);
        ``series_hash`` a full hash or a prefix."""
        with self.engine.connect() as conn:
            return load_series(conn, series_hash)

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return counts(conn)

    def fingerprint(self) -> str:
        with self.engine.connect() as conn:
            return fingerprint(conn)

    def revision(self) -> str | None:
        return _engine.current_revision(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
