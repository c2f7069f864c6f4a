"""Reference answers of the MLPerf datasets, for scoring an accuracy log.

The reference evaluations read these columns of the same files the prompts come from
(:mod:`tokenmark.workload.mlperf`), row ``i`` answering ``qsl_idx`` ``i``:

=====================  ===================  ========================================
benchmark              reference column     category column (which scorer applies)
=====================  ===================  ========================================
llama2-70b-99(.9)      ``output``           (ROUGE)
llama3.1-8b(-edge)     ``output``           (ROUGE)
mixtral-8x7b           ``gt_output``        ``dataset``: OpenOrca, GSM8K or MBXP
deepseek-r1            ``ground_truth``     ``dataset``: gpqa, mmlu_pro, math500, aime,
                                            livecodebench
gpt-oss-120b           ``ground_truth``     ``dataset``: aime25, gpqa_diamond,
                                            livecodebench_v6
=====================  ===================  ========================================

Any table :func:`~tokenmark.sources.tabular.open_table` reads works (the MLPerf pickles
need ``allow_pickle``); a JSONL file with those columns is enough for tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tokenmark.errors import DatasetError
from tokenmark.sources.tabular import open_table

__all__ = ["REFERENCE_COLUMNS", "References", "load_references"]

#: benchmark family -> (reference column, category column or None)
REFERENCE_COLUMNS: Final = {
    "llama2-70b": ("output", None),
    "llama3.1-8b": ("output", None),
    "mixtral-8x7b": ("gt_output", "dataset"),
    "deepseek-r1": ("ground_truth", "dataset"),
    "gpt-oss-120b": ("ground_truth", "dataset"),
}


def family(benchmark: str) -> str:
    """``llama2-70b-99.9`` -> ``llama2-70b``, ``llama3.1-8b-edge`` -> ``llama3.1-8b``."""
    name = benchmark.strip().lower().replace("-interactive", "")
    for key in REFERENCE_COLUMNS:
        if name.startswith(key):
            return key
    known = ", ".join(REFERENCE_COLUMNS)
    raise DatasetError(f"tokenmark cannot score {benchmark!r}; it scores: {known}")


@dataclass(frozen=True)
class References:
    """Reference answers (and categories) by dataset index."""

    source: str
    targets: tuple[str | None, ...]
    categories: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.targets)


def load_references(benchmark: str, path: Path | str, *, allow_pickle: bool = False,
                    fmt: str | None = None) -> References:
    """The reference column of ``benchmark``'s dataset file at ``path``."""
    ref_col, cat_col = REFERENCE_COLUMNS[family(benchmark)]
    table = open_table(path, fmt, allow_pickle=allow_pickle)
    cols = list(table.columns)
    if ref_col not in cols:
        raise DatasetError(f"{table.source}: no {ref_col!r} column with the reference "
                           f"answers of {benchmark} (its columns: {', '.join(cols[:20])})")
    if cat_col is not None and cat_col not in cols:
        raise DatasetError(f"{table.source}: no {cat_col!r} column saying which task each "
                           f"row of {benchmark} belongs to")
    targets: list[str | None] = []
    cats: list[str] = []
    for rec, _ in table.scan():
        v = rec.get(ref_col)
        targets.append(None if v is None or v != v else str(v))  # NaN -> None
        cats.append(str(rec.get(cat_col, "")) if cat_col else "")
    return References(table.source, tuple(targets), tuple(cats))
