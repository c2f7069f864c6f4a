"""Request-length distributions of the MLPerf LLM benchmarks, for simulated runs.

``data/workloads.csv`` gives, per benchmark, the input and output token-length
distributions a simulated run draws its synthetic dataset from, and where each number
comes from. Output means are matched to the published results themselves (tokens/s
divided by samples/s in the MLPerf results CSV); input lengths are estimates where no
published mean was found, and say so. A run against a real dataset file does not use
this table.

A vision-language benchmark's row also names its images per request and their size
(``images``, ``image_size``: one ``WIDTHxHEIGHT``, or a mix ``WxH*COUNT;WxH*COUNT;...``
read from the dataset's published size distribution): :func:`image_arrays` gives each
sample its image (sample *i* takes the size at the mix's quantile ``frac(i x 0.618...)``,
so any run's samples follow the mix) and :func:`image_load` the mean, as the prompt
tokens they add and the vision encoder's FLOPs by the one rule the emulated server
applies (:mod:`tokenmark.perfmodel.vision`: the processor's resize, 32 x 32 pixels a
token for Qwen3-VL, its ViT's FLOPs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.perfmodel.hardware import find_model, read_data_csv
from tokenmark.perfmodel.vision import vision_encoder

__all__ = ["Workload", "image_arrays", "image_load", "synthetic_dataset", "workload"]


@dataclass(frozen=True, slots=True)
class Workload:
    benchmark: str
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    output_mean_published: float | None
    beams: int  # sequences decoded per request (beam search width)
    status: str
    sources: str
    images: int = 0  # images per request (vision-language benchmarks)
    #: their sizes (width, height) in pixels and each size's weight in the mix
    image_sizes: tuple[tuple[tuple[int, int], float], ...] = ()


@cache
def _table() -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for r in read_data_csv("workloads.csv"):
        mean = r["output_mean_published"].strip()
        out[r["benchmark"]] = Workload(
            benchmark=r["benchmark"],
            input_tokens=LengthDistribution.parse(r["input_tokens"]),
            output_tokens=LengthDistribution.parse(r["output_tokens"]),
            output_mean_published=float(mean) if mean else None,
            beams=int(r["beams"] or 1),
            status=r["status"],
            sources=r["sources"],
            images=int(r.get("images") or 0),
            image_sizes=_sizes(r["benchmark"], r.get("image_size") or ""),
        )
    return out


def _sizes(benchmark: str, text: str) -> tuple[tuple[tuple[int, int], float], ...]:
    """``WxH`` or ``WxH*COUNT;WxH*COUNT;...`` as ((width, height), weight) pairs."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        size, _, count = part.partition("*")
        try:
            w, h = (int(x) for x in size.lower().split("x"))
            weight = float(count) if count else 1.0
        except ValueError:
            raise ConfigError(f"workloads.csv: {benchmark}'s image_size {part!r} is not "
                              "WIDTHxHEIGHT or WIDTHxHEIGHT*COUNT") from None
        if w < 1 or h < 1 or weight <= 0:
            raise ConfigError(f"workloads.csv: {benchmark}'s image_size {part!r} needs "
                              "positive sides and count")
        out.append(((w, h), weight))
    return tuple(out)


#: The golden-ratio step: sample i's quantile in the image-size mix is frac(i x this).
_STEP = (math.sqrt(5.0) - 1.0) / 2.0


def image_arrays(benchmark: str, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Each of ``n`` samples' image prompt tokens (image tokens and markers) and vision
    encoder FLOPs for ``benchmark``'s workload (None for a text-only one): sample *i*
    takes the size at quantile ``frac(i x 0.618...)`` of the workload's size mix."""
    try:
        w = workload(benchmark)
    except ConfigError:
        return None
    if not w.images or not w.image_sizes:
        return None
    enc = vision_encoder(find_model(benchmark))
    if enc is None:
        raise ConfigError(f"{benchmark} has images in workloads.csv but its model has no "
                          "row in vision.csv")
    tok = np.array([w.images * enc.prompt_tokens(x, y) for (x, y), _ in w.image_sizes],
                   dtype=np.int64)
    fl = np.array([w.images * enc.flops(enc.patches(x, y)) for (x, y), _ in w.image_sizes])
    cum = np.cumsum([c for _, c in w.image_sizes], dtype=np.float64)
    q = np.modf(np.arange(n, dtype=np.float64) * _STEP)[0] * cum[-1]
    pick = np.minimum(np.searchsorted(cum, q, side="right"), len(cum) - 1)
    return tok[pick], fl[pick]


def image_load(benchmark: str) -> tuple[float, float]:
    """The mean prompt tokens a request's images add (their image tokens and markers)
    and the mean FLOPs the vision encoder spends on them, over ``benchmark``'s image-size
    mix; (0, 0.0) for a text-only one."""
    try:
        w = workload(benchmark)
    except ConfigError:
        return 0, 0.0
    if not w.images or not w.image_sizes:
        return 0, 0.0
    enc = vision_encoder(find_model(benchmark))
    if enc is None:
        raise ConfigError(f"{benchmark} has images in workloads.csv but its model has no "
                          "row in vision.csv")
    total = sum(c for _, c in w.image_sizes)
    tokens = sum(c * enc.prompt_tokens(x, y) for (x, y), c in w.image_sizes) / total
    flops = sum(c * enc.flops(enc.patches(x, y)) for (x, y), c in w.image_sizes) / total
    return w.images * tokens, w.images * flops


def _key(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum()).replace("interactive", "")


def workload(benchmark: str) -> Workload:
    """The length distributions of ``benchmark`` (checker or LoadGen spelling)."""
    k = _key(benchmark)
    for name, w in _table().items():
        if _key(name) == k:
            return w
    raise ConfigError(
        f"no request-length table for {benchmark!r}; choose one of: {', '.join(_table())} "
        "or give --input-len/--output-len"
    )


def synthetic_dataset(
    benchmark: str,
    size: int,
    *,
    max_output_tokens: int | None = None,
    seed: int = 0,
    input_lengths: LengthDistribution | None = None,
    output_lengths: LengthDistribution | None = None,
) -> SyntheticDataset:
    """A synthetic dataset with ``benchmark``'s length distributions (either may be
    overridden), outputs capped at ``max_output_tokens``."""
    w = workload(benchmark) if input_lengths is None or output_lengths is None else None
    inp = input_lengths or (w.input_tokens if w else None)
    out = output_lengths or (w.output_tokens if w else None)
    assert inp is not None and out is not None
    return SyntheticDataset(size, inp, out, seed=seed, max_output_tokens=max_output_tokens)
