"""Configuration: the layering of round presets (:mod:`tokenmark.mlperf.presets`), TOML
files, ``user.conf`` and flags into ``TestSettings``.
"""
