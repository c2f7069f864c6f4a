"""From the user's options to the pieces of a run: the workload and the system under test.

:class:`WorkloadSpec` names where requests come from — a synthetic dataset (exact lengths
from a tokenizer's vocabulary, with shared prefixes or multi-turn conversations), a
dataset file (JSONL, CSV, Parquet, ShareGPT, an MLPerf reference format), or a trace
(Mooncake, Azure) whose timestamps become the schedule — plus optional images.
:func:`build_workload` reads it; :func:`http_sut_factory` builds the OpenAI-compatible
client (checking the target first, so a wrong URL, key or model fails in a second).
Both raise :class:`~tokenmark.errors.BadInputError` subclasses with one-line messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tokenmark.adapters.openai_target import OpenAIConfig, api_key, check_target, secrets
from tokenmark.adapters.server_tokenizer import ServerTokenizer
from tokenmark.api.suts import http_sut_factory  # the SUT is built in tokenmark.api.suts
from tokenmark.config.layering import DEMO_MAX_OUTPUT_TOKENS, LayeredSettings
from tokenmark.config.runspec import WorkloadSpec  # the run spec's dataset group
from tokenmark.dataset import Dataset, LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError, DatasetError
from tokenmark.perfmodel.outputs import output_model
from tokenmark.sources.hf_tokenizer import load_hf_tokenizer
from tokenmark.sources.image_files import FolderImages
from tokenmark.sources.mlperf import load_mlperf
from tokenmark.sources.sharegpt import load_sharegpt
from tokenmark.sources.tabular import ColumnMap, load_table
from tokenmark.sources.traces import load_trace
from tokenmark.tokenizer import BuiltinTokenizer, Tokenizer
from tokenmark.workload.conversations import ConversationDataset
from tokenmark.workload.images import ImageSize
from tokenmark.workload.multimodal import GeneratedImages, ImageDataset, ImageSource
from tokenmark.workload.table import TableOptions
from tokenmark.workload.traces import TraceWorkload

__all__ = ["Workload", "WorkloadSpec", "build_workload", "http_sut_factory"]

FILE_FORMATS = ("jsonl", "json", "csv", "parquet", "pickle", "sharegpt", "mlperf")


@dataclass(frozen=True)
class Workload:
    dataset: Dataset
    #: A trace's send times (ns from the start) and samples, or None for a scenario's own.
    trace_offsets_ns: np.ndarray | None = None
    trace_samples: np.ndarray | None = None
    notes: tuple[str, ...] = field(default=())


def _tokenizer(spec: WorkloadSpec) -> Tokenizer:
    if spec.tokenizer == "server":
        raise ConfigError("--tokenizer server builds prompts through an HTTP target's own "
                          "tokenizer; give --url (or --tokenizer PATH)")
    if spec.tokenizer in ("", "builtin"):
        if spec.chat_template or spec.chat_template_file:
            raise ConfigError("the built-in tokenizer has no chat template; give --tokenizer "
                              "PATH to a model's tokenizer folder")
        return BuiltinTokenizer()
    return load_hf_tokenizer(spec.tokenizer, chat_template=spec.chat_template_file)


def build_workload(spec: WorkloadSpec, layered: LayeredSettings,
                   tokenizer: Tokenizer | None = None) -> Workload:
    """The dataset (and trace schedule) a run sends, shaped by the benchmark's preset.
    ``tokenizer`` replaces the one ``spec.tokenizer`` names (``--tokenizer server``)."""
    preset = layered.preset
    s = layered.settings
    max_out = preset.max_output_tokens or 128
    if s.profile == "demo":
        max_out = min(max_out, DEMO_MAX_OUTPUT_TOKENS)
    tok = tokenizer or _tokenizer(spec)
    outl = LengthDistribution.parse(spec.output_lengths) if spec.output_lengths else None
    if spec.trace is not None:
        if spec.dataset is not None:
            raise ConfigError("give either --trace or --dataset, not both")
        table = load_trace(spec.trace, spec.trace_format)
        vocab = tok if isinstance(tok, BuiltinTokenizer) or hasattr(tok, "word_ids") else None
        tw = TraceWorkload.from_table(
            table, speedup=spec.trace_speedup, sort=spec.trace_sort, seed=spec.seed,
            tokenizer=vocab,  # type: ignore[arg-type]
            block_tokens=spec.trace_block_tokens, max_output_tokens=max_out)
        ds: Dataset = _with_images(tw.dataset, spec)
        return Workload(ds, tw.offsets_ns, tw.sample_index)
    if spec.dataset is not None:
        options = TableOptions(output_lengths=outl, max_output_tokens=max_out,
                               max_context=spec.max_context, skip_long=spec.skip_long,
                               chat_template=spec.chat_template, seed=spec.seed,
                               limit=spec.limit)
        fmt = spec.fmt
        if fmt is not None and fmt not in FILE_FORMATS:
            raise DatasetError(f"unknown dataset format {fmt!r}; choose one of: "
                               f"{', '.join(FILE_FORMATS)}")
        if fmt == "sharegpt":
            ds = load_sharegpt(spec.dataset, tok, options, turns=spec.sharegpt_turns)
        elif fmt == "mlperf":
            ds = load_mlperf(preset.name, spec.dataset, tok, output=spec.mlperf_output,
                             allow_pickle=spec.allow_pickle, limit=spec.limit,
                             max_context=spec.max_context, skip_long=spec.skip_long,
                             verify_images=spec.verify_images)
        else:
            cols = ColumnMap.parse(spec.columns) if spec.columns else None
            ds = load_table(spec.dataset, tok, options, fmt=fmt, columns=cols,
                            allow_pickle=spec.allow_pickle, verify_images=spec.verify_images)
        return Workload(_with_images(ds, spec))
    n = spec.size or s.total_sample_count or s.performance_sample_count or preset.dataset_size
    inp = LengthDistribution.parse(spec.input_lengths or "normal:800:200")
    # a benchmark with published output lengths (reasoning models: outputs.csv) draws
    # from them, capped at its maximum; the others from half the maximum to the maximum
    out = outl or output_model(preset.name).total or LengthDistribution.parse(
        f"uniform:{max(2, max_out // 2)}:{max_out}")
    vocab_tok = tok if hasattr(tok, "word_ids") else None
    if vocab_tok is None:
        raise ConfigError(f"the tokenizer {spec.tokenizer} has no usable vocabulary for "
                          "synthetic prompts; use a dataset file or the built-in tokenizer")
    if spec.conversations:
        ds = ConversationDataset(spec.conversations, LengthDistribution.parse(spec.turns),
                                 inp, out, seed=spec.seed, tokenizer=vocab_tok,  # type: ignore[arg-type]
                                 system_tokens=spec.system_tokens, max_output_tokens=max_out)
    else:
        ds = SyntheticDataset(n, inp, out, seed=spec.seed, tokenizer=vocab_tok,  # type: ignore[arg-type]
                              max_output_tokens=max_out, prefix_groups=spec.prefix_groups,
                              prefix_tokens=spec.prefix_tokens)
    return Workload(_with_images(ds, spec))


def _with_images(ds: Dataset, spec: WorkloadSpec) -> Dataset:
    if not spec.images_per_request:
        if spec.image_dir is not None:
            raise ConfigError("--image-dir needs --images-per-request N")
        return ds
    src: ImageSource
    if spec.image_dir is not None:
        src = FolderImages(spec.image_dir, verify=spec.verify_images)
    else:
        src = GeneratedImages(ImageSize.parse(spec.image_size), seed=spec.seed)
    return ImageDataset(ds, src, spec.images_per_request)


def server_tokenizer(config: OpenAIConfig) -> ServerTokenizer:
    """``--tokenizer server``: the target's own tokenizer (its first URL), the model
    checked first. Raises ConfigError/TargetError naming the fix."""
    checked = check_target(replace(config, tokenizer=""))
    key = api_key(checked)
    headers = [*(("Authorization", f"Bearer {key}"),) * bool(key), *checked.headers]
    return ServerTokenizer(checked.urls[0], checked.model, headers=headers,
                           timeout_s=checked.connect_timeout_s or 30.0,
                           secrets=secrets(checked, key))


def prebuild(dataset: Dataset) -> int:
    """Build every sample now (a tokenizer that asks a server remembers each prompt, so
    the run itself never waits for one); returns how many."""
    for i in range(len(dataset)):
        dataset.sample(i)
    return len(dataset)


def default_api(api: str, spec: WorkloadSpec, benchmark: str) -> str:
    """The API to send with: the one given, else chat when requests carry images (only
    chat messages can) or the benchmark's model reasons (only chat separates reasoning
    from the answer), else completions."""
    if api:
        return api
    if spec.images_per_request or output_model(benchmark).reasons:
        return "chat"
    return "completions"
