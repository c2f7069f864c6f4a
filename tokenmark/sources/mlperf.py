"""The MLPerf reference datasets, read from a local copy the user gives.

:func:`load_mlperf` reads a benchmark's file by the columns
:mod:`tokenmark.workload.mlperf` records. Pre-tokenized prompts (``tok_input``,
``input_tokens``) become ``Sample.token_ids`` with their exact counts; the prompt text
is the file's (CNN-DailyMail's is its instruction template filled with the article, as
the ids were made), or the ids decoded by the given tokenizer when the file has none.

Output length (``output``): ``"max"`` (default) asks every request for the benchmark's
``max_new_tokens``, what a real run sends, since MLPerf forbids stopping short;
``"reference"`` asks for the reference answer's length, what an emulated server or the
simulator needs to generate a realistic amount. Either way the reference length (where
the file has one) is kept as ``expected_output_tokens``.

The files are pickled DataFrames for most benchmarks: they are refused unless
``allow_pickle`` is given (a pickle can run code). gpt-oss-120b's Parquet and
CNN-DailyMail's JSON need no such trust.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenmark.dataset import LengthDistribution
from tokenmark.errors import DatasetError
from tokenmark.records import Message
from tokenmark.sources.image_files import load_image
from tokenmark.sources.tabular import (
    MappedReader,
    Shape,
    ids_cell,
    open_table,
    text_cell,
)
from tokenmark.tokenizer import ChatTemplater, Tokenizer
from tokenmark.workload.mlperf import MLPerfDataset, mlperf_dataset
from tokenmark.workload.table import Row, TableDataset, TableOptions

__all__ = ["load_mlperf"]

#: tokenmark's own wording of the Qwen3-VL task (the harness's prompt is not copied):
#: the request's shape (a system instruction, then the product's text and its photo)
#: is what matters for performance.
_VL_SYSTEM = (
    "Read the product in the user's message and answer with one JSON object with the "
    "fields category (exactly one of the listed categories), brand and is_secondhand. "
    "Ignore any source code in the description except the product facts inside it. "
    "Answer with the JSON object only.")
_VL_COLUMNS = ("product_image", "product_title", "product_description",
               "potential_product_categories")


def _shape(ds: MLPerfDataset, ids_col: str | None, base: Path, verify: bool) -> Shape:
    def shape(rec: dict[str, Any], where: str, k: int) -> list[Row]:
        del k
        if ds.multimodal:
            return [_vl_row(rec, base, where, verify)]
        ids = ids_cell(rec, ids_col, where) if ids_col else None
        text = None
        if ds.text is not None and ds.text in rec:
            text = text_cell(rec, ds.text, where)
            if ds.template is not None:
                text = _fill(rec.get(ds.template), text, where)
        if ids is None and text is None:
            raise DatasetError(f"{where}: no prompt: the {ds.text!r} column is missing")
        ref_ids = ids_cell(rec, ds.reference_ids, where) \
            if ds.reference_ids and ds.reference_ids in rec else None
        ref_text = text_cell(rec, ds.reference_text, where) \
            if ds.reference_text and ds.reference_text in rec and ref_ids is None else None
        return [Row(prompt=text, token_ids=ids,
                    reference_tokens=len(ref_ids) if ref_ids is not None else None,
                    reference_text=ref_text)]

    return shape


def _fill(template: Any, article: str, where: str) -> str:
    if not isinstance(template, dict) or not isinstance(template.get("llama"), str):
        raise DatasetError(f"{where}: 'instruction' should be {{\"llama\": template}}, as "
                           "in the reference cnn_eval.json")
    tpl: str = template["llama"]
    head, sep, tail = tpl.partition("{input}")
    if not sep:
        raise DatasetError(f"{where}: the instruction template has no {{input}} field")
    return head + article + tail


def _vl_row(rec: dict[str, Any], base: Path, where: str, verify: bool) -> Row:
    for col in _VL_COLUMNS:
        if col not in rec:
            raise DatasetError(f"{where}: no column {col!r}; a Shopify product-catalogue "
                               f"shard has {', '.join(_VL_COLUMNS)}")
    img = load_image(rec["product_image"], base, where, verify=verify)
    cats = rec["potential_product_categories"]
    if hasattr(cats, "tolist"):
        cats = cats.tolist()
    text = (f"Title:\n{text_cell(rec, 'product_title', where)}\n\n"
            f"Description:\n{text_cell(rec, 'product_description', where)}\n\n"
            f"Possible categories:\n{cats}")
    msgs = (Message("system", _VL_SYSTEM), Message("user", text, (img.url,)))
    return Row(messages=msgs, images=1, image_bytes=img.nbytes)


def load_mlperf(benchmark: str, path: Path | str, tokenizer: Tokenizer, *,
                output: str = "max", allow_pickle: bool = False, fmt: str | None = None,
                limit: int | None = None, max_context: int | None = None,
                skip_long: bool = False, verify_images: bool = False,
                output_tokens: int | None = None) -> TableDataset:
    """The benchmark's dataset from ``path`` (see the module docstring).

    ``output_tokens`` sets ``max_tokens`` where the benchmark has no maximum (Qwen3-VL).
    """
    ds = mlperf_dataset(benchmark)
    if output not in ("max", "reference"):
        raise DatasetError(f"unknown output length rule {output!r}; choose max or reference")
    table = open_table(path, fmt, allow_pickle=allow_pickle)
    cols: Sequence[str] = table.columns
    ids_col = next((c for c in ds.ids if c in cols), None)
    if ids_col is None and ds.ids_required:
        raise DatasetError(
            f"{table.source}: no {' or '.join(repr(c) for c in ds.ids)} column, so this is "
            f"not the {ds.title} file of {ds.benchmarks[0]} (expected "
            f"{', '.join(ds.files)}; its columns are {', '.join(map(str, cols[:20]))})")
    if ds.text is not None and ds.text not in cols and ids_col is None:
        raise DatasetError(f"{table.source}: no {ds.text!r} column with the prompts; give the "
                           f"{ds.title} file ({', '.join(ds.files)})")
    select = getattr(table, "select", None)
    if select is not None:
        wanted = [c for c in (ids_col, ds.text, ds.template, ds.reference_ids,
                              ds.reference_text) if c]
        select(list(_VL_COLUMNS) if ds.multimodal else wanted)
    max_new = ds.max_new_tokens or output_tokens
    if max_new is None:
        raise DatasetError(f"{ds.benchmarks[0]} sets no maximum output length; give one "
                           "(--output-len N)")
    if output == "reference" and not (ds.reference_ids or ds.reference_text):
        raise DatasetError(f"{ds.benchmarks[0]}'s dataset has no reference answers to take "
                           "lengths from; use --mlperf-output max")
    template = (ds.chat_template and ids_col is None and isinstance(tokenizer, ChatTemplater)
                and tokenizer.has_chat_template)
    options = TableOptions(
        output_lengths=LengthDistribution("fixed", max_new) if output == "max" else None,
        use_reference=output == "reference", max_output_tokens=max_new,
        max_context=max_context, skip_long=skip_long, chat_template=template, limit=limit)
    shape = _shape(ds, ids_col, Path(table.source).parent, verify_images)
    reader = MappedReader(table, shape, f"mlperf:{ds.key}:{ids_col}:{output}")
    return TableDataset(reader, tokenizer, options,
                        name=f"mlperf:{ds.benchmarks[0]}({table.source})")
