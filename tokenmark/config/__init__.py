"""Configuration: the packaged MLPerf round presets (:mod:`tokenmark.config.presets`) and the
layering of presets, TOML files, ``user.conf`` and flags into ``TestSettings``.
"""
