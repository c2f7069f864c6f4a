"""Alembic's entry point for tokenmark's migrations.

tokenmark runs migrations on a connection it opened (``config.attributes["connection"]``,
inside its own transaction: SQLite ``BEGIN IMMEDIATE``, so two processes creating one
new database queue instead of colliding). On PostgreSQL a transaction-scoped advisory
lock serialises concurrent upgrades the same way. Offline mode (``--sql``) renders the
SQL for the configured URL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from tokenmark.store.schema import metadata

#: Any fixed number: the key of the advisory lock that serialises upgrades.
_PG_LOCK_KEY = 7_106_652_315


def _run(connection: sa.Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    config = context.config
    if context.is_offline_mode():
        context.configure(url=config.get_main_option("sqlalchemy.url"),
                          target_metadata=metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = sa.create_engine(config.get_main_option("sqlalchemy.url") or "sqlite://")
    with engine.begin() as conn:
        _run(conn)


main()
