"""A child process of the concurrency test: waits for a common start time, then writes.

``python -m tests.results.concurrent_writer URL TAG N START_AT``: N transactions, each
adding one row of its own (submitter TAG) and one row both writers share; with TAG
``import:PATH`` it imports PATH N times instead.
"""

from __future__ import annotations

import sys
import time

from tokenmark.api import results as results_api
from tokenmark.resultrows import Label, ResultRow
from tokenmark.store import Store


def row(submitter: str, i: int, content: str) -> ResultRow:
    return ResultRow(round="v9.9", division="closed", submitter=submitter, system_id=f"s{i}",
                     benchmark="b", scenario="Offline", value=float(i), unit="Tokens/s",
                     metric="m", label=Label.OFFICIAL, content_hash=content)


def main(url: str, tag: str, n: int, start_at: float) -> None:
    with Store.open(url) as st:
        while time.time() < start_at:
            time.sleep(0.001)
        for i in range(n):
            if tag.startswith("import:"):
                rep = results_api.import_results(tag.split(":", 1)[1], db=url)
                assert rep.ok and rep.written, rep.errors
            else:
                st.write([row(tag, i, f"{tag}-{i}"), row("shared", i, "same")])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
