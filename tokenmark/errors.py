"""The one exception tree of tokenmark.

Exceptions are for bad input and bugs; a request that fails during a run is data
(``RequestRecord.error``), never an exception.

    TokenmarkError
    ├── BadInputError            the user can fix it: exit code 2, one line, no traceback
    │   ├── ConfigError          settings, presets, config files, flags
    │   ├── DatasetError         dataset files and workload specifications
    │   ├── TargetError          the system under test cannot be used (wrong model, unreachable)
    │   ├── StoreError           the results database cannot be used (bad URL, old schema)
    │   └── AnalysisError        an analysis asked of result rows that cannot answer it
    └── InternalError            a bug in tokenmark: exit code 3

Every ``BadInputError`` message names the problem and the fix, e.g.
``unknown benchmark 'llama9' for round v6.0; choose one of: ...``.
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_VALID",
    "AnalysisError",
    "BadInputError",
    "ConfigError",
    "DatasetError",
    "InternalError",
    "StoreError",
    "TargetError",
    "TokenmarkError",
]


#: Documented exit codes (README "Exit codes"); :mod:`tokenmark.api.run` re-exports them.
EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class TokenmarkError(Exception):
    """Base of every error tokenmark raises on purpose."""


class BadInputError(TokenmarkError):
    """Bad input the user can fix; the message says what is wrong and how to fix it."""


class ConfigError(BadInputError):
    """Unknown preset, round, benchmark or scenario; impossible or malformed settings."""


class DatasetError(BadInputError):
    """A dataset or workload specification that cannot be used."""


class TargetError(BadInputError):
    """The system under test cannot be used as asked (wrong model name, unreachable)."""


class StoreError(BadInputError):
    """The results database cannot be opened or used as asked (URL, driver, schema version)."""


class AnalysisError(BadInputError):
    """An analysis refused its input (ambiguous system, unequal accelerator counts, ...)."""


class InternalError(TokenmarkError):
    """A bug in tokenmark."""
