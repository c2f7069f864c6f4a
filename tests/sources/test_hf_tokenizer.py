"""A model's tokenizer from local files: exact counts, word ids, chat templates, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.workload_support import make_hf_tokenizer
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import DatasetError
from tokenmark.records import Message
from tokenmark.tokenizer import ChatTemplater, VocabularyTokenizer, exact_text

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

from tokenmark.sources.hf_tokenizer import load_hf_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_hf_tokenizer(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def tok(model_dir):
    return load_hf_tokenizer(model_dir)


def test_loads_a_model_folder_and_meets_the_protocols(tok, model_dir):
    assert isinstance(tok, VocabularyTokenizer) and isinstance(tok, ChatTemplater)
    assert tok.has_chat_template
    text = "The quick brown fox jumps over the lazy dog."
    assert tok.decode(tok.encode(text)) == text
    assert tok.count(text) == len(tok.encode(text))
    assert str(model_dir) in tok.name
    # the same files give the same fingerprint; a tokenizer.json alone has no template
    bare = load_hf_tokenizer(model_dir / "tokenizer.json")
    assert not bare.has_chat_template and bare.fingerprint != tok.fingerprint
    assert load_hf_tokenizer(model_dir).fingerprint == tok.fingerprint


def test_word_ids_make_text_of_exact_length(tok):
    words = tok.word_ids()
    assert len(words) > 20
    rng = np.random.default_rng(0)
    for n in (1, 7, 64, 300):
        ids = [int(x) for x in rng.choice(np.asarray(words), size=n)]
        text, real = exact_text(tok, ids)
        assert tok.encode(text) == list(real)
        assert len(real) == n


def test_synthetic_prompts_are_exact_under_a_model_tokenizer(tok):
    ds = SyntheticDataset(20, LengthDistribution.parse("uniform:5:80"),
                          LengthDistribution.parse("16"), tokenizer=tok, seed=5,
                          prefix_groups=2, prefix_tokens=12)
    for i in range(len(ds)):
        s = ds.sample(i)
        assert tok.count(s.prompt) == s.input_tokens == len(s.token_ids or ())
    assert ds.describe()["tokenizer"] == tok.name


def test_chat_template_renders_like_transformers(tok):
    msgs = [Message("system", "Be brief."), Message("user", "Hello there", ("data:x",))]
    text = tok.apply_chat_template(msgs)
    assert text == ("<s><|system|>\nBe brief.<|end|>\n<|user|>\n<|image|>Hello there<|end|>\n"
                    "<|assistant|>\n")
    ids = tok.encode(text)
    assert ids[0] == tok.encode("<s>")[0] and len(tok.encode("<|assistant|>")) == 1


def test_template_file_overrides_the_folder(tmp_path, model_dir):
    f = tmp_path / "t.jinja"
    f.write_text("{% for m in messages %}{{ m['content'] }}|{% endfor %}")
    t = load_hf_tokenizer(model_dir, chat_template=f)
    assert t.apply_chat_template([Message("user", "a"), Message("user", "b")]) == "a|b|"


@pytest.mark.parametrize("case", ["missing", "not_json", "bad_template", "raises"])
def test_bad_tokenizer_files_are_clear_errors(tmp_path, model_dir, case):
    if case == "missing":
        with pytest.raises(DatasetError, match="no tokenizer.json"):
            load_hf_tokenizer(tmp_path)
        return
    if case == "not_json":
        (tmp_path / "tokenizer.json").write_text("{not json")
        with pytest.raises(DatasetError, match="tokenizers library can read"):
            load_hf_tokenizer(tmp_path)
        return
    folder = make_hf_tokenizer(tmp_path / "m", template="{% for m in messages %}")
    if case == "bad_template":
        with pytest.raises(DatasetError, match="does not parse"):
            load_hf_tokenizer(folder)
        return
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{{ raise_exception('roles must alternate') }}"
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(DatasetError, match="roles must alternate"):
        load_hf_tokenizer(folder).apply_chat_template([Message("user", "x")])


_PIECES = ["<s>", "</s>", "<|end|>", "<|user|>", "<|image|>", " the", " quick", "fox", "\n",
           "\r\n", "  ", "\t", "'s", "'ll", "123", "é", "ß", "日本語", "🙂", "\u200b", "<|",
           "|>", "<", ">", "é"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=12)), max_size=60))
def test_count_is_the_length_of_a_plain_encode(tok, parts):
    """The client's re-count (``count``, which skips the offsets) equals the plain
    per-request ``len(encode(text).ids)`` on adversarial text: special-token strings and
    their halves, CRLF and whitespace runs, contractions, non-ASCII, any unicode."""
    text = "".join(parts)
    assert tok.count(text) == len(tok._tok.encode(text, add_special_tokens=False).ids)
