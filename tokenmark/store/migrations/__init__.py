"""Alembic migrations of the results database (see :mod:`tokenmark.store.engine`)."""
