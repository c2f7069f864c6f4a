"""Where the results database is, how to connect to it, and its schema version.

Location (first that applies): the ``db`` argument (``--db``), the ``TOKENMARK_DB``
environment variable, else ``results.db`` in the user's data directory
(``$XDG_DATA_HOME/tokenmark``, default ``~/.local/share/tokenmark``; macOS
``~/Library/Application Support/tokenmark``; Windows ``%LOCALAPPDATA%\\tokenmark``).
A value containing ``://`` is a SQLAlchemy URL (``postgresql://user@host/db`` uses
psycopg 3); anything else is a SQLite file path.

SQLite is opened for concurrent writers: WAL journal (readers never block the
writer), ``busy_timeout`` 30 s, foreign keys on, and write transactions that start with
``BEGIN IMMEDIATE`` so two processes queue for the write lock instead of failing when a
reader upgrades. :func:`retrying` repeats a transaction that still lost the race
(SQLite "database is locked"; PostgreSQL serialization failure or deadlock).

Schema: Alembic migrations in ``tokenmark/store/migrations``. :func:`ensure_schema`
creates a new database at the newest revision and refuses an older one with the
command that upgrades it (upgrading existing data is the user's explicit step), except
the user's default local file (no ``--db``, no ``$TOKENMARK_DB``), which it upgrades
and says so (:attr:`tokenmark.store.Store.upgraded_from`);
:func:`upgrade` runs the migrations. A new migration: ``from alembic import command;
command.revision(alembic_config(url), "message", rev_id="0007")``, and
:data:`HEAD_REVISION` set to it (a test checks the two agree). Opening a database that
is at :data:`HEAD_REVISION` reads its version with one query and never imports Alembic
(a third of a second of a command's start).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from tokenmark.datadir import DB_ENV, default_db_path, resolve_db_url
from tokenmark.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "DB_ENV",
    "HEAD_REVISION",
    "alembic_config",
    "create",
    "current_revision",
    "default_path",
    "ensure_schema",
    "head_revision",
    "resolve_url",
    "retrying",
    "upgrade",
]

#: The newest migration's revision (``migrations/versions``); a test checks it is
#: Alembic's head.
HEAD_REVISION = "0006"
_BUSY_TIMEOUT_MS = 30_000
_T = TypeVar("_T")


def default_path() -> Path:
    """``results.db`` in the user's data directory (see the module docstring)."""
    return default_db_path()


def resolve_url(db: str | os.PathLike[str] | None = None) -> str:
    """The SQLAlchemy URL of ``db``, ``$TOKENMARK_DB`` or the default file."""
    return resolve_db_url(db)


def _sqlite_setup(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get("tokenmark_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def create(url: str) -> sa.Engine:
    """An engine for ``url``; :class:`StoreError` for a bad URL or a missing driver."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"cannot read database URL {url!r} ({exc}); give a file path or a "
                         "URL such as postgresql://user@host/db") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"database URL {url!r} is neither SQLite nor PostgreSQL; give a file "
                         "path, sqlite:///PATH or postgresql://user@host/db")
    try:
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                try:
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create the folder of {parsed.database} "
                                     f"({exc.strerror}); pass --db with a writable path") from None
            engine = sa.create_engine(parsed, connect_args={"timeout": _BUSY_TIMEOUT_MS / 1000})
            _sqlite_setup(engine)
            return engine
        return sa.create_engine(parsed, pool_pre_ping=True)
    except (ImportError, sa.exc.NoSuchModuleError) as exc:
        raise StoreError(f"no driver for {parsed.drivername} ({exc}): pip install "
                         "'psycopg[binary]' (or tokenmark[postgres])") from None


def alembic_config(url: str, connection: sa.Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "tokenmark.store:migrations")
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:
        raise StoreError("the package has no migrations (a broken install?)")
    return head


def current_revision(engine: sa.Engine) -> str | None:
    """The database's schema revision (``None``: no ``alembic_version`` table)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        got = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(got) > 1:
        raise StoreError(f"{engine.url!r} records {len(got)} schema revisions "
                         f"({', '.join(got)}); it was not made by tokenmark's migrations")
    return got[0] if got else None


def upgrade(engine: sa.Engine, revision: str = "head") -> str:
    """Migrate the database to ``revision`` (in one transaction); returns the new revision."""

    from alembic import command

    def run() -> None:
        with engine.connect() as conn:
            conn.execution_options(tokenmark_write=True)
            with conn.begin():
                command.upgrade(alembic_config(str(engine.url), conn), revision)

    retrying(run)
    rev = current_revision(engine)
    return rev or ""


def ensure_schema(engine: sa.Engine, *, create_missing: bool = True,
                  auto_upgrade: bool = False) -> str | None:
    """Create a new database's tables; refuse one at an older or unknown revision, or
    with ``auto_upgrade`` (the user's default local file only) migrate an older one and
    return the revision it was at (``None``: nothing was upgraded)."""
    try:
        rev = current_revision(engine)
    except sa.exc.OperationalError as exc:
        raise StoreError(f"cannot open the results database {engine.url!r}: "
                         f"{exc.orig or exc}") from None
    if rev == HEAD_REVISION:
        return None
    from alembic.script import ScriptDirectory

    head = head_revision()
    if rev == head:
        return None
    if rev is None:
        with engine.connect() as conn:
            tables = sa.inspect(conn).get_table_names()
        if tables and "results" in tables:
            raise StoreError(f"{engine.url!r} has tokenmark's tables but no schema version; "
                             "it was not made by tokenmark's migrations")
        if not create_missing:
            raise StoreError(f"{engine.url!r} holds no results database; run "
                             "'tokenmark db upgrade' (or import something) to create it")
        upgrade(engine)
        return None
    known = {s.revision for s in ScriptDirectory.from_config(
        alembic_config("sqlite://")).walk_revisions()}
    if rev not in known:
        raise StoreError(f"the results database is at schema {rev}, newer than this tokenmark "
                         f"knows ({head}); upgrade tokenmark")
    if auto_upgrade:
        upgrade(engine)
        return rev
    raise StoreError(f"the results database is at schema {rev}; this tokenmark needs {head}: "
                     f"run 'tokenmark db upgrade --db {engine.url.render_as_string()}'")


def _transient(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in ("40001", "40P01"):  # serialization failure, deadlock
        return True
    text = str(orig or exc).lower()
    return "database is locked" in text or "database is busy" in text


def retrying(fn: Callable[[], _T], *, attempts: int = 8) -> _T:
    """Run the transaction ``fn``; repeat it when it lost a race with another writer."""
    delay = 0.05
    for i in range(attempts):
        try:
            return fn()
        except sa.exc.DBAPIError as exc:
            if i == attempts - 1 or not _transient(exc):
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")
