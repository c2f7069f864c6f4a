"""The MLPerf Inference LLM datasets: file formats and columns, as the reference
harnesses in ``mlcommons/inference`` read them (``language/<model>/dataset.py``,
``SUT*.py``, ``mlperf/qsl.py``, ``utils/tokenization.py``; ``multimodal/qwen3-vl``).

Each :class:`MLPerfDataset` is data, not code: which columns hold the pre-tokenized
prompt (kept as ``Sample.token_ids``, so counts are the reference's and a client can
send the ids), the prompt text, the reference answer, the benchmark's
``max_new_tokens`` (the request's ``max_tokens``: MLPerf forbids cutting outputs
shorter) and input limit. :mod:`tokenmark.sources.mlperf` reads the files by these.

=====================  ============================  ===========================================
benchmark              file (format)                 columns used
=====================  ============================  ===========================================
llama2-70b-99(.9)      open_orca_gpt4_tokenized_     ``tok_input`` ids (Llama-2 prompt format,
                       llama.sampled_24576.pkl        with BOS), ``input`` text, ``tok_output`` /
                       (pickled DataFrame)            ``output`` reference
mixtral-8x7b           09292024_mixtral_15k_         ``tok_input``, ``input``, ``gt_output``
                       mintoken2_v1.pkl (pickle)
llama3.1-8b(-edge)     cnn_eval.json /               ``tok_input`` ids of the instruction
                       sample_cnn_eval_5000.json      template applied to ``input`` (the article);
                       (JSON array)                   ``instruction`` = {"llama": template};
                                                      ``output`` reference summary
llama3.1-405b          mlperf_llama3.1_405b_dataset  ``tok_input``, ``input``, ``gt_output``
                       _8313_processed_fp16_eval.pkl
deepseek-r1            mlperf_deepseek_r1_dataset_   ``text_input`` (the harness applies the
                       4388_fp8_eval.pkl              model's chat template); ``ground_truth``
                                                      is an answer key, not a length reference
gpt-oss-120b           perf_eval_ref.parquet (or     ``tok_input`` (older) or ``input_tokens``
                       .pkl)                          ids, already in the harmony format
qwen3-vl-235b-a22b     Shopify product-catalogue     ``product_image`` (image cell),
                       Parquet shards                 ``product_title``,
                                                      ``product_description``,
                                                      ``potential_product_categories``
=====================  ============================  ===========================================
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenmark.errors import DatasetError

__all__ = ["MLPERF_DATASETS", "MLPerfDataset", "mlperf_dataset"]


@dataclass(frozen=True, slots=True)
class MLPerfDataset:
    key: str
    benchmarks: tuple[str, ...]
    title: str
    files: tuple[str, ...]
    formats: tuple[str, ...]  # what the harness reads, in its order of preference
    ids: tuple[str, ...] = ()  # candidate columns of prompt token ids (first present wins)
    ids_required: bool = True
    text: str | None = None  # prompt text column
    template: str | None = None  # column holding {"llama": "...{input}..."}
    reference_ids: str | None = None
    reference_text: str | None = None
    max_new_tokens: int | None = None
    max_input_tokens: int | None = None
    chat_template: bool = False  # the harness renders the text with the model's template
    samples: int = 0
    multimodal: bool = False


MLPERF_DATASETS: tuple[MLPerfDataset, ...] = (
    MLPerfDataset("open-orca", ("llama2-70b-99", "llama2-70b-99.9"), "OpenOrca (GPT-4 part)",
                  ("open_orca_gpt4_tokenized_llama.sampled_24576.pkl",), ("pickle",),
                  ids=("tok_input",), text="input", reference_ids="tok_output",
                  reference_text="output", max_new_tokens=1024, max_input_tokens=1024,
                  samples=24576),
    MLPerfDataset("mixtral-15k", ("mixtral-8x7b",), "OpenOrca + GSM8K + MBXP",
                  ("09292024_mixtral_15k_mintoken2_v1.pkl",), ("pickle",),
                  ids=("tok_input",), text="input", reference_text="gt_output",
                  max_new_tokens=1024, samples=15000),
    MLPerfDataset("cnn-dailymail", ("llama3.1-8b", "llama3.1-8b-edge"),
                  "CNN-DailyMail v3.0.0", ("cnn_eval.json", "sample_cnn_eval_5000.json"),
                  ("json",), ids=("tok_input",), text="input", template="instruction",
                  reference_text="output", max_new_tokens=128, max_input_tokens=2048,
                  samples=13368),
    MLPerfDataset("llama3.1-405b", ("llama3.1-405b",), "LongBench, RULER, GovReport, ...",
                  ("mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl",), ("pickle",),
                  ids=("tok_input",), text="input", reference_text="gt_output",
                  max_new_tokens=2000, samples=8313),
    MLPerfDataset("deepseek-r1", ("deepseek-r1",), "AIME, MATH500, GPQA, MMLU-Pro, LCB",
                  ("mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl",), ("pickle",),
                  ids=("tok_input",), ids_required=False, text="text_input",
                  max_new_tokens=20000, chat_template=True, samples=4388),
    MLPerfDataset("gpt-oss", ("gpt-oss-120b",), "AIME25, GPQA Diamond, LiveCodeBench v6",
                  ("perf_eval_ref.parquet", "acc_eval_inputs.parquet"), ("parquet", "pickle"),
                  ids=("tok_input", "input_tokens"), max_new_tokens=10000, samples=6396),
    MLPerfDataset("shopify", ("qwen3-vl-235b-a22b",), "Shopify product catalogue",
                  ("*.parquet (Shopify/product-catalogue, train + test)",), ("parquet",),
                  ids_required=False, max_new_tokens=None, samples=48289, multimodal=True),
)


def mlperf_dataset(benchmark: str) -> MLPerfDataset:
    """The dataset of a benchmark, by its checker name (``-interactive`` ignored)."""
    name = benchmark.strip().lower().replace("-interactive", "")
    for d in MLPERF_DATASETS:
        if name in d.benchmarks or name == d.key:
            return d
    known = ", ".join(b for d in MLPERF_DATASETS for b in d.benchmarks)
    raise DatasetError(f"no MLPerf dataset for {benchmark!r}; choose one of: {known}")
