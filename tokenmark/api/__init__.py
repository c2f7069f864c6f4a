"""The Python entry points (one module per command family)."""
