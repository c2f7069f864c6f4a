"""The MLPerf reference datasets, from fixtures in their real schemas (made here)."""

from __future__ import annotations

import json

import pytest

from tests.workload_support import (
    ids_of,
    make_hf_tokenizer,
    sentences,
    write_cnn_dailymail,
    write_deepseek,
    write_gpt_oss,
    write_open_orca,
    write_shopify,
)
from tokenmark.errors import DatasetError
from tokenmark.sources.mlperf import load_mlperf
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.images import ImageSize, generate_png
from tokenmark.workload.mlperf import mlperf_dataset

TOK = BuiltinTokenizer()


def test_open_orca_pickle_keeps_the_reference_ids(tmp_path):
    pytest.importorskip("pandas")
    p = write_open_orca(tmp_path / "open_orca_gpt4_tokenized_llama.sampled_24576.pkl")
    with pytest.raises(DatasetError, match="--allow-pickle"):
        load_mlperf("llama2-70b-99", p, TOK)
    ds = load_mlperf("llama2-70b-99.9", p, TOK, allow_pickle=True)
    s = ds.sample(2)
    q = sentences(6, 1)[2]
    assert s.prompt.endswith(f"{q} [/INST]") and s.token_ids == tuple(ids_of(s.prompt))
    assert s.input_tokens == len(s.token_ids)  # the reference count, not ours
    assert s.output_tokens == 1024  # max_new_tokens: MLPerf forbids stopping short
    assert s.expected_output_tokens == len(ids_of(sentences(6, 2)[2])) - 1
    ref = load_mlperf("llama2-70b-99", p, TOK, allow_pickle=True, output="reference")
    assert ref.sample(2).output_tokens == s.expected_output_tokens
    assert ref.fingerprint != ds.fingerprint


def test_cnn_dailymail_json_fills_the_instruction_template(tmp_path):
    p = write_cnn_dailymail(tmp_path / "cnn_eval.json")
    ds = load_mlperf("llama3.1-8b", p, TOK)
    art = sentences(5, 3)[1]
    s = ds.sample(1)
    assert s.prompt.startswith("Summarize the following news article in 128 tokens.")
    assert f"Article:\n{art}\n\nSummary:" in s.prompt
    assert s.token_ids is not None and s.output_tokens == 128
    assert len(ds) == 5 and ds.describe()["source"] == str(p)
    edge = load_mlperf("llama3.1-8b-edge", p, TOK, limit=2)
    assert len(edge) == 2


def test_cnn_dailymail_errors_name_the_line(tmp_path):
    p = write_cnn_dailymail(tmp_path / "cnn_eval.json", n=3)
    rows = json.loads(p.read_text())
    rows[2]["tok_input"] = "not ids"
    text = json.dumps(rows, indent=4)
    p.write_text(text)
    starts = [n for n, line in enumerate(text.splitlines(), 1) if line == "    {"]
    with pytest.raises(DatasetError, match=rf"cnn_eval\.json line {starts[2]}: column "
                                           "'tok_input' is not a list of token ids"):
        load_mlperf("llama3.1-8b", p, TOK)


def test_deepseek_text_gets_the_models_chat_template(tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("tokenizers")
    pytest.importorskip("jinja2")
    from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

    p = write_deepseek(tmp_path / "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl")
    tok = load_hf_tokenizer(make_hf_tokenizer(tmp_path / "m"))
    ds = load_mlperf("deepseek-r1", p, tok, allow_pickle=True)
    s = ds.sample(0)
    assert s.chat_template and s.prompt.endswith("<|assistant|>\n")
    assert s.input_tokens == tok.count(s.prompt) and s.output_tokens == 20000
    plain = load_mlperf("deepseek-r1", p, TOK, allow_pickle=True)
    assert not plain.sample(0).chat_template  # the built-in tokenizer has no template
    with pytest.raises(DatasetError, match="no reference answers"):
        load_mlperf("deepseek-r1", p, TOK, allow_pickle=True, output="reference")


@pytest.mark.parametrize("column", ["input_tokens", "tok_input"])
def test_gpt_oss_parquet_needs_no_pickle_trust(tmp_path, column):
    pytest.importorskip("pyarrow")
    p = write_gpt_oss(tmp_path / "perf_eval_ref.parquet", column=column)
    ds = load_mlperf("gpt-oss-120b", p, TOK)
    s = ds.sample(3)
    assert s.token_ids == tuple(ids_of(sentences(4, 6)[3])) and s.output_tokens == 10000


def test_qwen3_vl_product_shards_become_image_chats(tmp_path):
    pytest.importorskip("pyarrow")
    imgs = [generate_png(1, i, ImageSize(16, 12)) for i in range(3)]
    p = write_shopify(tmp_path / "test-00000-of-00001.parquet", imgs)
    with pytest.raises(DatasetError, match="sets no maximum output length"):
        load_mlperf("qwen3-vl-235b-a22b", p, TOK)
    ds = load_mlperf("qwen3-vl-235b-a22b", p, TOK, output_tokens=256, verify_images=True)
    s = ds.sample(1)
    system, user = s.messages or ()
    assert system.role == "system" and "Product 1" in user.content
    assert user.images[0].startswith("data:image/png;base64,") and s.images == 1
    assert s.image_bytes == len(imgs[1]) and ds.describe()["image_bytes"] == sum(map(len, imgs))


def test_the_wrong_file_is_named_as_such(tmp_path):
    p = tmp_path / "other.jsonl"
    p.write_text('{"question": "what", "answer": "that"}\n')
    with pytest.raises(DatasetError, match=r"no 'tok_input' or 'input_tokens' column, so "
                                           r"this is not the .* file of gpt-oss-120b.*"
                                           r"columns are question"):
        load_mlperf("gpt-oss-120b", p, TOK)
    with pytest.raises(DatasetError, match="no MLPerf dataset for 'llama9'"):
        mlperf_dataset("llama9")
    assert mlperf_dataset("llama2-70b-interactive-99").key == "open-orca"
