"""Request-length distributions of the MLPerf LLM benchmarks, for simulated runs.

``data/workloads.csv`` gives, per benchmark, the input and output token-length
distributions a simulated run draws its synthetic dataset from, and where each number
comes from. Output means are matched to the published results themselves (tokens/s
divided by samples/s in the MLPerf results CSV); input lengths are estimates where no
published mean was found, and say so. A run against a real dataset file does not use
this table.

A vision-language benchmark's row also names its images per request and their size
(``images``, ``image_size``): :func:`image_load` turns them into the prompt tokens they
add and the vision encoder's FLOPs by the one rule the emulated server applies
(:mod:`tokenmark.perfmodel.vision`: the processor's resize, 32 x 32 pixels a token for
Qwen3-VL, its ViT's FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.perfmodel.hardware import find_model, read_data_csv
from tokenmark.perfmodel.vision import vision_encoder

__all__ = ["Workload", "image_load", "synthetic_dataset", "workload"]


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
    image_size: tuple[int, int] = (0, 0)  # their width and height in pixels


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
            image_size=_size(r.get("image_size") or ""),
        )
    return out


def _size(text: str) -> tuple[int, int]:
    if not text:
        return (0, 0)
    w, h = text.lower().split("x")
    return int(w), int(h)


def image_load(benchmark: str) -> tuple[int, float]:
    """The prompt tokens a request's images add (their image tokens and markers) and
    the FLOPs the vision encoder spends on them, for ``benchmark``'s workload; (0, 0.0)
    for a text-only one."""
    try:
        w = workload(benchmark)
    except ConfigError:
        return 0, 0.0
    if not w.images:
        return 0, 0.0
    enc = vision_encoder(find_model(benchmark))
    if enc is None:
        raise ConfigError(f"{benchmark} has images in workloads.csv but its model has no "
                          "row in vision.csv")
    width, height = w.image_size
    return (w.images * enc.prompt_tokens(width, height),
            w.images * enc.flops(enc.patches(width, height)))


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
