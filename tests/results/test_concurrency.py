"""Two processes writing to one database at once lose nothing (SQLite and PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.paths import ROOT, SAMPLES
from tokenmark.api import results as results_api
from tokenmark.store import Store

N = 40


def _run_both(db: str, tags: list[str], n: int) -> None:
    with Store.open(db):  # create the schema first: the race under test is the writes
        pass
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-m", "tests.results.concurrent_writer", db,
                               tag, str(n), str(start)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for tag in tags]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out.decode()


def test_two_writers_interleaved_lose_nothing(db):
    _run_both(db, ["A", "B"], N)
    with Store.open(db) as st:
        rows = st.rows()
    by_submitter: dict[str, int] = {}
    for r in rows:
        by_submitter[r.submitter] = by_submitter.get(r.submitter, 0) + 1
    assert by_submitter == {"A": N, "B": N, "shared": N}


def test_two_imports_of_one_tree_at_once_equal_one_import(db, tmp_path):
    _run_both(db, [f"import:{SAMPLES}", f"import:{SAMPLES}"], 3)
    serial = f"sqlite:///{tmp_path / 'serial.db'}"
    results_api.import_results(SAMPLES, db=serial)
    with Store.open(db) as a, Store.open(serial) as b:
        assert a.counts() == b.counts()
        assert a.fingerprint() == b.fingerprint()
