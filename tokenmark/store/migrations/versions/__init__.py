"""One module per schema revision; Alembic loads them by file (this file it skips)."""
