"""Request tables from JSONL, JSON, CSV, Parquet and pickles: mapping, exact counts,
lazy rows, and a clear error (file, line, fix) for every kind of bad input."""

from __future__ import annotations

import base64
import csv
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.workload_support import make_hf_tokenizer
from tokenmark.dataset import LengthDistribution
from tokenmark.errors import DatasetError
from tokenmark.sources.tabular import ColumnMap, load_table
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.images import ImageSize, generate_png
from tokenmark.workload.table import TableOptions

TOK = BuiltinTokenizer()
OPT = TableOptions()


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def load(path, **kw):
    opts = kw.pop("options", OPT)
    return load_table(path, TOK, opts, **kw)


def test_jsonl_rows_count_exactly_and_are_read_again_lazily(tmp_path):
    rows = [{"prompt": f"ka be {'di ' * i}x", "max_tokens": 5 + i, "answer": "ok fine"}
            for i in range(30)]
    ds = load(jsonl(tmp_path / "d.jsonl", rows))
    assert len(ds) == 30
    for i in (0, 17, 29):
        s = ds.sample(i)
        assert s.prompt == rows[i]["prompt"] and s.token_ids is None and not s.is_chat
        assert s.input_tokens == TOK.count(rows[i]["prompt"])
        assert s.output_tokens == 5 + i and s.expected_output_tokens == TOK.count("ok fine")
    d = ds.describe()
    assert d["tokenizer"] == TOK.name and d["chat_template"] is False and d["samples"] == 30
    again = load(tmp_path / "d.jsonl")
    assert again.fingerprint == ds.fingerprint
    rows[3]["prompt"] += " more"
    assert load(jsonl(tmp_path / "d.jsonl", rows)).fingerprint != ds.fingerprint


def test_csv_with_quoted_newlines_commas_and_a_mapping(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('id,question,n\n1,"line one\nline, two",7\n2,"say ""hi""",3\n',
                 encoding="utf-8")
    ds = load(p, columns=ColumnMap.parse("prompt=question,output_tokens=n"))
    assert [ds.sample(i).prompt for i in range(2)] == ["line one\nline, two", 'say "hi"']
    assert [ds.sample(i).output_tokens for i in range(2)] == [7, 3]


def test_json_array_and_an_output_distribution(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps([{"text": "a b"}, {"text": "c d e"}], indent=2))
    opts = TableOptions(output_lengths=LengthDistribution.parse("9"))
    ds = load(p, options=opts)
    assert [ds.sample(i).prompt for i in range(2)] == ["a b", "c d e"]
    assert {ds.sample(i).output_tokens for i in range(2)} == {9}


def test_parquet_messages_with_images_from_cells_and_paths(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    png = generate_png(0, 0, ImageSize(8, 6))
    (tmp_path / "pic.png").write_bytes(png)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    msgs = [{"role": "user", "content": [{"type": "text", "text": "what is it"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]
    pq.write_table(pa.table({"messages": [json.dumps(msgs)], "image": ["pic.png"],
                             "max_tokens": [4]}), tmp_path / "d.parquet")
    ds = load(tmp_path / "d.parquet")
    s = ds.sample(0)
    assert s.is_chat and s.images == 2 and s.image_bytes == 2 * len(png)
    (m,) = s.messages or ()
    assert m.content == "what is it" and m.images[0] == url and m.images[1] == url
    assert ds.describe()["images"] == 2


def test_chat_template_is_applied_and_recorded(tmp_path):
    pytest.importorskip("tokenizers")
    pytest.importorskip("jinja2")
    from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

    tok = load_hf_tokenizer(make_hf_tokenizer(tmp_path / "m"))
    p = jsonl(tmp_path / "d.jsonl", [{"prompt": "The quick fox.", "max_tokens": 3}])
    ds = load_table(p, tok, TableOptions(chat_template=True))
    s = ds.sample(0)
    assert s.chat_template and s.prompt.startswith("<s><|user|>\nThe quick fox.")
    assert s.input_tokens == tok.count(s.prompt)
    assert s.messages is not None and s.messages[0].content == "The quick fox."
    assert ds.describe()["chat_template"] is True
    with pytest.raises(DatasetError, match="has none"):
        load(p, options=TableOptions(chat_template=True))


def test_prompts_longer_than_the_context(tmp_path):
    p = jsonl(tmp_path / "d.jsonl", [{"prompt": "ka " * 5, "max_tokens": 4},
                                     {"prompt": "ka " * 50, "max_tokens": 4}])
    with pytest.raises(DatasetError, match=r"d\.jsonl line 2: the prompt is 50 tokens.*"
                                           r"context of 20 tokens.*--skip-long-prompts"):
        load(p, options=TableOptions(max_context=20))
    ds = load(p, options=TableOptions(max_context=20, skip_long=True))
    assert len(ds) == 1 and ds.describe()["skipped_long_prompts"] == 1
    short = load(p, options=TableOptions(max_context=7, skip_long=True))
    assert short.sample(0).output_tokens == 2 and short.describe()["shortened_outputs"] == 1


def test_pickles_need_an_explicit_flag(tmp_path):
    pd = pytest.importorskip("pandas")
    p = tmp_path / "d.pkl"
    pd.DataFrame({"prompt": ["a b", "c"], "max_tokens": [2, 3]}).to_pickle(p)
    with pytest.raises(DatasetError, match="can run code.*--allow-pickle"):
        load(p)
    ds = load(p, allow_pickle=True)
    assert [ds.sample(i).prompt for i in range(2)] == ["a b", "c"]
    (tmp_path / "l.pkl").write_bytes(__import__("pickle").dumps([1, 2]))
    with pytest.raises(DatasetError, match="not a pandas DataFrame"):
        load(tmp_path / "l.pkl", allow_pickle=True)


BAD = [
    ("empty.jsonl", b"", "the file is empty"),
    ("latin.jsonl", b'{"prompt": "ok", "max_tokens": 1}\n{"prompt": "caf\xe9"}\n',
     r"line 2: not UTF-8 \(byte 0xe9 at column 16"),
    ("broken.jsonl", b'{"prompt": "ok", "max_tokens": 1}\n{"prompt": \n',
     r"line 2: not valid JSON"),
    ("array.jsonl", b'[1, 2]\n', r"line 1: a JSON list, not an object"),
    ("nokey.jsonl", b'{"prompt": "a", "max_tokens": 1}\n{"max_tokens": 2}\n',
     r"line 2: no column 'prompt' in this record"),
    ("noprompt.jsonl", b'{"body": "a", "max_tokens": 1}\n', r"no prompt column among 'body'"),
    ("nolength.jsonl", b'{"prompt": "a"}\n', r"line 1: no output length.*--output-len"),
    ("badlen.jsonl", b'{"prompt": "a", "max_tokens": "many"}\n',
     r"line 1: column 'max_tokens' is 'many', not a whole number"),
    ("blank.jsonl", b'{"prompt": "  ", "max_tokens": 1}\n', r"line 1: the prompt is empty"),
    ("fields.csv", b'prompt,max_tokens\na,1\nb,2,3\n', r"line 3: 3 fields where the header"),
    ("open.csv", b'prompt,max_tokens\n"a,1\n', r"line 2: a quoted field is never closed"),
    ("img.jsonl", b'{"prompt": "a", "max_tokens": 1, "image": "x.txt"}\n',
     r"line 1: '.*x\.txt' is not an image"),
    ("noimg.jsonl", b'{"prompt": "a", "max_tokens": 1, "image": "gone.png"}\n',
     r"line 1: no image file"),
    ("d.txt", b'{"prompt": "a"}\n', r"cannot tell the format"),
]


@pytest.mark.parametrize("name,data,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_file_line_and_fix(tmp_path, name, data, match):
    (tmp_path / "x.txt").write_text("just text")
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(DatasetError, match=match) as e:
        load(p)
    assert name in str(e.value) or "cannot tell" in str(e.value)


def test_missing_files_and_mapped_columns(tmp_path):
    with pytest.raises(DatasetError, match="no such file.*downloads nothing"):
        load(tmp_path / "nope.jsonl")
    p = jsonl(tmp_path / "d.jsonl", [{"q": "a", "max_tokens": 1}])
    with pytest.raises(DatasetError, match=r"no column 'question' \(for prompt\); its "
                                           r"columns are 'q', 'max_tokens'"):
        load(p, columns=ColumnMap.parse("prompt=question"))
    with pytest.raises(DatasetError, match="ROLE=COLUMN"):
        ColumnMap.parse("words=q")


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                blacklist_characters="\r\x00"),
                        min_size=1).filter(str.strip), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_survives_csv_and_jsonl_byte_offsets(tmp_path, prompts):
    c = tmp_path / "p.csv"
    with open(c, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["prompt", "max_tokens"])
        w.writerows([p, 1] for p in prompts)
    j = jsonl(tmp_path / "p.jsonl", [{"prompt": p, "max_tokens": 1} for p in prompts])
    for path in (c, j):
        ds = load(path)
        assert [ds.sample(i).prompt for i in reversed(range(len(ds)))] == prompts[::-1]
