"""The official LoadGen bridge's QSL load callback waits for LoadGen's log thread.

LoadGen 6.0.17 logs the loaded set through a lambda that holds it by reference; a test
that ends before the log thread runs that lambda makes it read freed memory (a segfault).
The callback returns only once the detail log shows the set, so the set is alive then.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.adapters.official_loadgen import _LOADED_SET_KEYS, _LoadedSetLogged

LINE = b':::MLLOG {"key": "loaded_qsl_set", "value": [1, 2, 3]}\n'


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from([LINE, b"Loading QSL : set [4]\n", b"x", b"\n",
                                       b'"loaded_', b'qsl_set"', b"Loading", b" QSL"]),
                      max_size=30),
       cuts=st.lists(st.integers(0, 400), max_size=8))
def test_counts_every_key_once_however_the_log_grows(tmp_path_factory, parts, cuts) -> None:
    path = tmp_path_factory.mktemp("log") / "mlperf_log_detail.txt"
    text = b"".join(parts)
    waiter = _LoadedSetLogged(path)
    path.write_bytes(b"")
    written = 0
    for cut in sorted(c for c in cuts if c <= len(text)) + [len(text)]:
        with path.open("ab") as f:
            f.write(text[written:cut])
        written = max(written, cut)
        waiter._count_new()
    assert waiter.seen == sum(text.count(k) for k in _LOADED_SET_KEYS)


def test_returns_once_the_log_thread_wrote_the_set(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_bytes(b':::MLLOG {"key": "loadgen_version"}\n')

    def log_thread() -> None:  # LoadGen's IO thread, a little late
        time.sleep(0.2)
        with path.open("ab") as f:
            f.write(LINE)

    t = threading.Thread(target=log_thread)
    t.start()
    _LoadedSetLogged(path, timeout_s=30.0)([1, 2, 3])
    assert LINE in path.read_bytes()  # not before the line was there
    t.join()


def test_each_load_waits_for_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_bytes(LINE)
    waiter = _LoadedSetLogged(path, timeout_s=0.05)
    waiter([1])  # the first line is there
    t0 = time.monotonic()
    waiter([2])  # the second is not: it gives up at its timeout, no sooner
    assert time.monotonic() - t0 >= 0.05
    assert (waiter.loads, waiter.seen) == (2, 1)


def test_a_missing_log_is_waited_for_then_given_up(tmp_path: Path) -> None:
    waiter = _LoadedSetLogged(tmp_path / "absent.txt", timeout_s=0.02)
    waiter([1])
    assert waiter.seen == 0
