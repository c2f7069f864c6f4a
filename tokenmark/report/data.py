"""The data of one run's report: ``results.json`` plus what ``records.jsonl`` shows over
time, reduced to what the plots draw.

:func:`run_report_data` reads the records file once, in batches of
:data:`BATCH` lines, without building :class:`~tokenmark.records.RequestRecord` objects,
and keeps only bounded accumulators (:mod:`tokenmark.report.bins`): memory does not grow
with the run beyond one value per request and metric for the exact CDFs (and not even
that past :class:`~tokenmark.report.bins.Values`' cap).

What each plot holds, with the summary's definitions (:mod:`tokenmark.metrics.definitions`):

- distributions of TTFT, TPOT, end-to-end latency (measured, answered requests, from
  the scheduled time; TPOT LoadGen's per-request formula) and ITL (each chunk gap spread
  over the chunk's tokens): a CDF (exact sorted values, downsampled; ITL from the
  histogram), a histogram, the limit of the preset, and the exact percentiles of
  ``results.json``;
- over time (every record, warm-up and cool-down included, in round bins chosen from
  the run's length: 48 to 120 bins of 1, 2 or 5 x 10^k seconds): output tokens/s at
  the time each chunk arrived, completed requests/s, requests in flight at each bin's
  end, send lag (max and mean of the requests scheduled in the bin), errors by class
  (at the time each failed; no plot when nothing failed), tokens/s per endpoint;
- per endpoint: ``summary.per_endpoint`` of ``results.json``.

Without a records file (the web UI holds only ``results.json``), the distributions are
drawn from the percentiles alone and the over-time plots are left out; ``records`` in
the returned data says which.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.metrics.definitions import e2e_ns, itl_split, send_lag_ns, tpot_ns, ttft_ns
from tokenmark.output.records import RECORDS_FILE
from tokenmark.output.results import read_results
from tokenmark.report.bins import (
    DISPLAY_TIME_BINS,
    LogHistogram,
    TimeBins,
    Values,
    cdf_from_sorted,
)

__all__ = ["BATCH", "MAX_ENDPOINT_SERIES", "load_results", "run_report_data"]

BATCH = 1024
MAX_ENDPOINT_SERIES = 12
_METRICS = ("ttft", "tpot", "itl", "e2e")
_TITLES = {"ttft": "Time to first token", "tpot": "Time per output token",
           "itl": "Inter-token latency", "e2e": "End-to-end latency"}
_LIMIT_KEYS = {"ttft": "ttft_ns", "tpot": "tpot_ns", "e2e": "e2e_ns"}


def load_results(path: Path) -> dict[str, Any]:
    """``results.json`` of a results folder (or the file itself), read by the one reader
    (:func:`~tokenmark.output.results.read_results`: any earlier version comes back in
    the current form)."""
    return read_results(path).to_json()


class _Accumulators:
    def __init__(self) -> None:
        self.time = TimeBins()
        self.hist = {m: LogHistogram() for m in _METRICS}
        self.values = {m: Values() for m in ("ttft", "tpot", "e2e")}
        self.endpoints: dict[str, int] = {}
        self.records = 0

    def endpoint_key(self, name: str) -> str:
        if name in self.endpoints:
            return f"ep{self.endpoints[name]}"
        if len(self.endpoints) < MAX_ENDPOINT_SERIES:
            self.endpoints[name] = len(self.endpoints)
            return f"ep{self.endpoints[name]}"
        return "ep_other"


def _batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    loads = json.loads
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # a torn last line (a crash mid-write)
            batch.append(loads(line))
            if len(batch) >= BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def _col(batch: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.fromiter((d[key] for d in batch), dtype=np.int64, count=len(batch))


def _add_batch(acc: _Accumulators, batch: list[dict[str, Any]]) -> None:
    n = len(batch)
    acc.records += n
    sched, issued = _col(batch, "scheduled_ns"), _col(batch, "issued_ns")
    first, done = _col(batch, "first_token_ns"), _col(batch, "done_ns")
    out_tok = _col(batch, "output_tokens")
    ok = np.fromiter((d["error"] is None for d in batch), dtype=bool, count=n) & (done >= 0)
    meas = np.fromiter((d["phase"] == "measure" for d in batch), dtype=bool, count=n)
    tb = acc.time

    # requests: sent, finished (ok or failed), send lag at the scheduled time
    sent = issued >= 0
    tb.add("issued", issued[sent])
    fin_t = np.where(done >= 0, done, np.where(sent, issued, sched))
    tb.add("finished", fin_t[sent])
    tb.add("completed", done[ok])
    lag = send_lag_ns(sched, issued)[sent]
    tb.add("lag_sum", sched[sent], lag.astype(np.float64))
    tb.add("lag_n", sched[sent])
    tb.peak("lag_max", sched[sent], lag)
    for i in np.flatnonzero(~ok):
        d = batch[i]
        tb.add("err:" + (d["error"] or "unanswered"), fin_t[i:i + 1])

    # chunks: arrival times and tokens (for throughput and ITL)
    lens = np.fromiter((len(d["chunk_gaps_ns"]) for d in batch), dtype=np.int64, count=n)
    has_chunks = first >= 0
    flat = np.fromiter((g for d in batch for g in d["chunk_gaps_ns"]), dtype=np.int64,
                       count=int(lens.sum()))
    toks_flat = np.ones(int((lens + has_chunks).sum()), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens + has_chunks)[:-1]])
    for i in np.flatnonzero([d["chunk_tokens"] is not None for d in batch]):
        ct = batch[i]["chunk_tokens"]
        toks_flat[starts[i]:starts[i] + len(ct)] = ct
    # chunk times: first token, then first + cumulative gaps, per record
    rec_of_gap = np.repeat(np.arange(n), lens)
    csum = np.cumsum(flat)
    gap_starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    before = np.where(gap_starts > 0, csum[np.maximum(gap_starts - 1, 0)], 0) if flat.size \
        else np.zeros(n, dtype=np.int64)
    gap_times = first[rec_of_gap] + csum - before[rec_of_gap] if flat.size else flat
    chunk_rec = np.repeat(np.arange(n), lens + has_chunks)
    is_first = np.zeros(chunk_rec.size, dtype=bool)
    is_first[starts[has_chunks]] = True
    chunk_t = np.empty(chunk_rec.size, dtype=np.int64)
    chunk_t[is_first] = first[has_chunks]
    chunk_t[~is_first] = gap_times
    okc = ok[chunk_rec]
    tb.add("tokens", chunk_t[okc], toks_flat[okc].astype(np.float64))
    # tokens the chunks did not carry (no streaming, or usage counted more) at completion
    streamed = np.bincount(chunk_rec[okc], weights=toks_flat[okc], minlength=n)
    rest = np.where(ok, out_tok - streamed, 0)
    tb.add("tokens", done[rest != 0], rest[rest != 0].astype(np.float64))
    eps = [acc.endpoint_key(d["endpoint"]) for d in batch] if any(
        d["endpoint"] for d in batch) else None
    if eps is not None:
        for key in set(eps):
            m = np.fromiter((e == key for e in eps), dtype=bool, count=n)
            mc = m[chunk_rec] & okc
            tb.add(key, chunk_t[mc], toks_flat[mc].astype(np.float64))
            mr = m & (rest != 0)
            tb.add(key, done[mr], rest[mr].astype(np.float64))

    # distributions: measured, answered requests, from the scheduled time
    okm = ok & meas
    e2e = e2e_ns(sched, done)[okm]
    ttft = ttft_ns(sched, first, done)[okm]
    tpot = tpot_ns(e2e, ttft, out_tok[okm])
    for name, vals in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        acc.hist[name].add(vals)
        acc.values[name].extend(vals)
    # ITL: gaps of measured, answered requests, each spread over its chunk's tokens
    gap_ok = okm[rec_of_gap]
    if gap_ok.any():
        later = ~is_first
        base, repeats, last = itl_split(flat[gap_ok], toks_flat[later][gap_ok])
        multi = repeats > 0
        hist = acc.hist["itl"]
        hist.add(last[~multi])
        if multi.any():
            hist.add(base[multi], repeats[multi])
            hist.add(last[multi])


def _distribution(name: str, doc: Mapping[str, Any], acc: _Accumulators | None) -> dict[str, Any]:
    lat = (doc.get("summary", {}).get("latency_ms") or {}).get(name) or {}
    eff = doc.get("settings", {}).get("effective", {})
    limits = eff.get("limits_ns") or {}
    lim_ns = limits.get(_LIMIT_KEYS[name]) if name in _LIMIT_KEYS else None
    pcts = {k: v for k, v in (lat.get("percentiles") or {}).items()}
    out: dict[str, Any] = {
        "name": name, "title": _TITLES[name], "unit": "ms", "count": lat.get("count", 0),
        "mean": lat.get("mean"), "min": lat.get("min"), "max": lat.get("max"),
        "percentiles": pcts, "limit": None if lim_ns is None else lim_ns / 1e6,
        "limit_percentile": eff.get("target_latency_percentile"),
    }
    if acc is None:
        xs = [lat.get("min")] + list(pcts.values()) + [lat.get("max")]
        ys = [0.0] + [float(k) / 100 for k in pcts] + [1.0]
        pts = sorted((x, y) for x, y in zip(xs, ys, strict=True) if x is not None)
        out["cdf"] = {"x": [p[0] for p in pts], "y": [p[1] for p in pts],
                      "source": "percentiles of results.json only (records not available)"}
        out["hist"] = None
        return out
    hist = acc.hist[name]
    vals = acc.values.get(name)
    if vals is not None and not vals.overflowed:
        x, y = cdf_from_sorted(vals.sorted())
        source = "exact per-request values (downsampled for drawing)"
    else:
        x, y = hist.cdf()
        source = "a histogram of 1.2%-wide bins (exact percentiles in the table)"
    out["cdf"] = {"x": [v / 1e6 for v in x], "y": y, "source": source}
    edges, counts = hist.display()
    out["hist"] = {"edges": [e / 1e6 for e in edges], "counts": counts}
    return out


def _series(acc: _Accumulators) -> dict[str, Any]:
    tb = acc.time
    w = tb.coarsen(DISPLAY_TIME_BINS) / 1e9
    issued, finished = tb.sum_series("issued"), tb.sum_series("finished")
    lag_n = tb.sum_series("lag_n")
    lag_mean = np.where(lag_n > 0, tb.sum_series("lag_sum") / np.maximum(lag_n, 1), np.nan)
    errors = {k[4:]: tb.sum_series(k).tolist() for k in sorted(tb.sums) if k.startswith("err:")}
    names = {f"ep{i}": name or "(none)" for name, i in acc.endpoints.items()}
    if "ep_other" in tb.sums:
        names["ep_other"] = "other endpoints"
    per_ep = {names[k]: (tb.sum_series(k) / w).tolist() for k in names} if len(names) > 1 else {}

    def clean(a: np.ndarray) -> list[float | None]:
        return [None if not np.isfinite(v) else float(v) for v in a]

    return {
        "bin_s": w,
        "t": tb.starts_s().tolist(),
        "output_tokens_per_s": (tb.sum_series("tokens") / w).tolist(),
        "completed_per_s": (tb.sum_series("completed") / w).tolist(),
        "in_flight": np.cumsum(issued - finished).tolist(),
        "send_lag_max_ms": clean(np.where(lag_n > 0, tb.peak_series("lag_max") / 1e6, np.nan)),
        "send_lag_mean_ms": clean(lag_mean / 1e6),
        "send_lag_bins": int(np.count_nonzero(lag_n)),  # bins with a request scheduled
        "errors": errors,  # only classes that occurred: none, no errors plot
        "endpoint_tokens_per_s": per_ep,
    }


def run_report_data(results_dir: Path, *, records: bool = True) -> dict[str, Any]:
    """Everything the report of the results folder ``results_dir`` draws (JSON-ready).

    ``records=False`` (or a folder without ``records.jsonl``) gives the summary-only
    form the web UI shows for runs it holds no records of.
    """
    doc = load_results(results_dir)
    folder = results_dir if results_dir.is_dir() else results_dir.parent
    rec_path = folder / str(doc.get("files", {}).get("records") or RECORDS_FILE)
    acc: _Accumulators | None = None
    if records and rec_path.name == RECORDS_FILE and rec_path.is_file():
        acc = _Accumulators()
        try:
            for batch in _batches(rec_path):
                _add_batch(acc, batch)
        except (RecursionError, KeyError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(f"{rec_path} holds a line that is not a tokenmark record "
                             f"({type(e).__name__}); give the records.jsonl the run "
                             "wrote") from None
    return report_data(doc, acc)


def report_data(doc: Mapping[str, Any], acc: _Accumulators | None = None) -> dict[str, Any]:
    """The report data of a ``results.json`` document (and records, when read)."""
    summary = doc.get("summary", {})
    return {
        "kind": "run",
        "records": acc is not None,
        "record_count": 0 if acc is None else acc.records,
        "distributions": [_distribution(m, doc, acc) for m in _METRICS],
        "series": None if acc is None or acc.records == 0 else _series(acc),
        "endpoints": summary.get("per_endpoint") or {},
    }
