"""Helpers for the submission tests: copies of published trees to edit."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.paths import SAMPLES


@pytest.fixture
def v60(tmp_path: Path) -> Path:
    """A writable copy of the published v6.0 sample folders (closed/ and open/ only)."""
    root = tmp_path / "v6.0"
    root.mkdir()
    for div in ("closed", "open"):
        shutil.copytree(SAMPLES / "v6.0" / div, root / div)
    return root


def set_detail(path: Path, **values: object) -> None:
    """Rewrite the value of each key's first line in a LoadGen detail log (an edit)."""
    text = path.read_text()
    for key, value in values.items():
        pat = re.compile(r'("key": "' + re.escape(key) + r'", "value": )(.*?)(, "time_ms")')
        new = json.dumps(value)
        text, n = pat.subn(lambda m, new=new: m.group(1) + new + m.group(3), text, count=1)
        assert n == 1, key
    path.write_text(text)
