"""Fixtures for the workload tests, made at test time (nothing is downloaded).

- :func:`make_hf_tokenizer`: a byte-level BPE tokenizer trained in well under a second
  on generated English-like text, saved as a model folder (``tokenizer.json``,
  ``tokenizer_config.json`` with a chat template), like a real model's.
- ``write_*``: files in the real schemas of the MLPerf reference datasets, as the
  harnesses in ``mlcommons/inference`` read them (column names and cell types only; the
  texts are made up).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<|image|>"
    "{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
WORDS = ("the a model server token cache prefix request answer question summary article "
         "benchmark latency throughput image product price brand category reason think "
         "first second third quick brown fox jumps over lazy dog and of to in is it").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."
            for _ in range(n)]


def make_hf_tokenizer(folder: Path, *, template: str | None = TEMPLATE) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>",
                "<|image|>"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sentences(400), trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config: dict[str, object] = {"bos_token": "<s>", "eos_token": {"content": "</s>"}}
    if template is not None:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def ids_of(text: str, width: int = 7) -> list[int]:
    """Stand-in token ids for a text (what a reference tokenizer would have produced)."""
    return [1] + [100 + (len(w) * 37 + i) % 900 for i, w in enumerate(text.split())][:width * 50]


def write_open_orca(path: Path, n: int = 6) -> Path:
    """llama2-70b: a pickled DataFrame like open_orca_gpt4_tokenized_llama.*.pkl."""
    import pandas as pd

    rows = []
    for i, (q, a) in enumerate(zip(sentences(n, 1), sentences(n, 2), strict=True)):
        prompt = f"<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\n{q} [/INST]"
        rows.append({"id": f"cot.{i}", "system_prompt": "You are helpful.", "question": q,
                     "output": a, "input": prompt, "tok_input": ids_of(prompt),
                     "tok_output": ids_of(a)[1:], "origin": "cot"})
    pd.DataFrame(rows).to_pickle(path)
    return path


def write_cnn_dailymail(path: Path, n: int = 5) -> Path:
    """llama3.1-8b: a JSON array like cnn_eval.json (indent=4, as the script writes it)."""
    template = ("Summarize the following news article in 128 tokens. Please output the "
                "summary only, without any other text.\n\nArticle:\n{input}\n\nSummary:")
    rows = []
    for art, summ in zip(sentences(n, 3), sentences(n, 4), strict=True):
        rows.append({"instruction": {"llama": template}, "input": art,
                     "tok_input": ids_of(template.replace("{input}", art)), "output": summ})
    path.write_text(json.dumps(rows, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def write_deepseek(path: Path, n: int = 4) -> Path:
    """deepseek-r1: a pickled DataFrame with text_input and answer-key columns."""
    import pandas as pd

    qs = sentences(n, 5)
    pd.DataFrame({"text_input": qs, "question": qs, "ground_truth": ["42"] * n,
                  "dataset": ["aime"] * n, "metric": ["exact_match"] * n}).to_pickle(path)
    return path


def write_gpt_oss(path: Path, n: int = 4, column: str = "input_tokens") -> Path:
    """gpt-oss-120b: Parquet with a list<int> prompt-ids column (v4.0+ name by default)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = [ids_of(s) for s in sentences(n, 6)]
    pq.write_table(pa.table({column: ids, "dataset": ["gpqa"] * n,
                             "ground_truth": ["B"] * n}), path)
    return path


def write_shopify(path: Path, images: list[bytes]) -> Path:
    """qwen3-vl: a Parquet shard with HF image cells ({"bytes", "path"}) and the text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(images)
    pq.write_table(pa.table({
        "product_image": [{"bytes": b, "path": f"img{i}.png"} for i, b in enumerate(images)],
        "product_title": [f"Product {i}" for i in range(n)],
        "product_description": sentences(n, 7),
        "potential_product_categories": [["Toys", "Tools", "Apparel"]] * n,
    }), path)
    return path
