"""Where tokenmark keeps the user's data: the results database and a refreshed table of
published results (standard library only, so a command can ask without loading a
database driver).

The data folder is ``$XDG_DATA_HOME/tokenmark`` (default ``~/.local/share/tokenmark``;
macOS ``~/Library/Application Support/tokenmark``; Windows ``%LOCALAPPDATA%\\tokenmark``).
The database is the ``db`` argument (``--db``), else ``$TOKENMARK_DB``, else
``results.db`` there; a value containing ``://`` is a SQLAlchemy URL, anything else a
SQLite file path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["DB_ENV", "data_dir", "default_db_path", "resolve_db_url", "sqlite_file"]

DB_ENV = "TOKENMARK_DB"


def data_dir() -> Path:
    """The user's tokenmark data folder (see the module docstring)."""
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "tokenmark"


def default_db_path() -> Path:
    """``results.db`` in the data folder."""
    return data_dir() / "results.db"


def resolve_db_url(db: str | os.PathLike[str] | None = None) -> str:
    """The SQLAlchemy URL of ``db``, ``$TOKENMARK_DB`` or the default file."""
    value = os.fspath(db) if db is not None else os.environ.get(DB_ENV) or ""
    if not value:
        value = str(default_db_path())
    if "://" not in value:
        return "sqlite:///" + str(Path(value).expanduser().resolve())
    for prefix in ("postgresql://", "postgres://"):
        if value.startswith(prefix):
            return "postgresql+psycopg://" + value[len(prefix):]
    return value


def sqlite_file(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL (``None`` for other databases and ``:memory:``)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///")
    return Path(path) if path and path != ":memory:" else None
