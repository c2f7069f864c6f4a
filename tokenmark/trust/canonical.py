"""Canonical JSON and content hashes.

Canonical form: UTF-8 JSON with keys sorted, no whitespace, no NaN or infinity, floats in
Python's shortest round-trip form. Two documents with equal content serialise to equal
bytes on any machine, so their SHA-256 is a content hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["canonical_bytes", "file_sha256", "plain", "sha256_hex"]

_CHUNK = 1 << 20


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses and mappings as objects (string keys),
    enums as their values, tuples and sets as lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(plain(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} has no canonical JSON form")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return plain(value.item())
    raise TypeError(f"cannot put a {type(value).__name__} in canonical JSON")


def canonical_bytes(doc: Any) -> bytes:
    return json.dumps(plain(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()
