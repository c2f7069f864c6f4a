"""Answer extraction, benchmark evaluation from an accuracy log, and the accuracy gate."""

from __future__ import annotations

import json
import re

import pytest

from tokenmark.mlperf.accuracylog import (
    AccuracyEntry,
    AccuracyLogFormat,
    encode_ids,
    parse_accuracy_log,
    render_accuracy_log,
)
from tokenmark.mlperf.presets import load_round
from tokenmark.scoring import answers
from tokenmark.scoring.evaluate import accuracy_txt, evaluate, gate
from tokenmark.sources.references import load_references

pytest.importorskip("rouge_score")

# A toy "tokenizer": id k is word WORDS[k]; decoding joins with spaces.
WORDS = ["<s>", "</s>", "The", "answer", "is", "42", "7", "ANSWER:", "B", "C", "\\boxed{12}",
         "cat", "sat", "on", "mat", "the", "dog", "ran", ".", "Answer:", "5"]
IDS = {w: i for i, w in enumerate(WORDS)}


def decode(ids):
    return " ".join(WORDS[i] for i in ids if i > 1)


def enc(text):
    return [IDS[w] for w in text.split()]


def log_of(outputs: list[str]) -> list[dict]:
    entries = [AccuracyEntry(i, i, encode_ids(enc(t)), None, len(enc(t)))
               for i, t in enumerate(outputs)]
    return parse_accuracy_log(render_accuracy_log(entries, AccuracyLogFormat(True, False)))


def refs_file(tmp_path, rows):
    p = tmp_path / "refs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_gsm8k_extraction():
    assert answers.gsm8k_number("so 3+4. The answer is 1,234 apples. 9") == "1234"
    assert answers.gsm8k_number("first 5 then 7.5\nQ: next 99") == "7.5"
    assert answers.gsm8k_correct("The answer is 42", "42.0")
    assert not answers.gsm8k_correct("no number", "42")


def test_choice_and_aime_and_boxed():
    assert answers.choice_deepseek("reasoning... ANSWER: (B) done", "D") == "B"
    assert answers.choice_deepseek("the letter J is it", "J") == "J"
    assert answers.choice_gptoss("<|channel|>analysis<|message|>A?<|channel|>final"
                                 "<|message|>**C**<|return|>", "D") == "C"
    assert answers.aime_answer("so \\boxed{12} and Answer: 5") == 12
    assert answers.aime_answer("Answer: 1000") is None
    assert answers.boxed("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert answers.math_equal("\\dfrac{1}{2}", "\\frac{1}{2}")


def test_rouge_benchmark_with_length_gate(tmp_path):
    refs = load_references("llama3.1-8b", refs_file(tmp_path, [
        {"output": "the cat sat on the mat ."}, {"output": "the dog ran ."}]))
    rep = evaluate("llama3.1-8b", log_of(["the cat sat on the mat .", "the dog ran ."]),
                   refs, decode)
    assert rep.metrics["rouge1"] == 100.0 and rep.metrics["gen_num"] == 2
    targets = load_round("v6.0").benchmark("llama3.1-8b").accuracy_targets()
    res = {r.target.metric: r for r in gate(rep, targets)}
    assert res["ROUGE1"].passed is True
    assert res["GEN_LEN"].passed is False  # 2 tiny samples, far below 0.9 x 8167644
    txt = accuracy_txt(rep, b"[]")
    assert re.match(r".*'rouge1':\s+'?([\d.]+)'?.*", txt.splitlines()[0])
    assert txt.splitlines()[1].startswith("hash=") and len(txt.splitlines()[1]) == 69


def test_99_and_999_percent_targets():
    rnd = load_round("v6.0")
    t99 = next(t for t in rnd.benchmark("llama2-70b-99").accuracy if t.metric == "ROUGE1")
    t999 = next(t for t in rnd.benchmark("llama2-70b-99.9").accuracy if t.metric == "ROUGE1")
    score = 44.4312 * 0.995  # between 99% and 99.9% of the reference
    assert t99.accepts(score) and not t999.accepts(score)


def test_mixtral_counts_gsm8k_and_leaves_mbxp_unevaluated(tmp_path):
    refs = load_references("mixtral-8x7b", refs_file(tmp_path, [
        {"gt_output": "42", "dataset": "GSM8K"}, {"gt_output": "7", "dataset": "GSM8K"},
        {"gt_output": "the cat sat", "dataset": "OpenOrca"},
        {"gt_output": "tests", "dataset": "MBXP"}]))
    rep = evaluate("mixtral-8x7b", log_of(["The answer is 42", "The answer is 5",
                                           "the cat sat", "the dog"]), refs, decode)
    assert rep.metrics["gsm8k"] == 50.0 and rep.metrics["rouge1"] == 100.0
    assert rep.metrics["mbxp"] is None and rep.not_evaluated == {"MBXP": 1}
    mbxp = next(r for r in gate(rep, load_round("v6.0").benchmark("mixtral-8x7b").accuracy)
                if r.target.metric == "mbxp_accuracy")
    assert mbxp.passed is None and "INCOMPLETE" in mbxp.line()


def test_exact_match_benchmarks(tmp_path):
    refs = load_references("deepseek-r1", refs_file(tmp_path, [
        {"ground_truth": "B", "dataset": "gpqa"}, {"ground_truth": "12", "dataset": "aime"},
        {"ground_truth": "C", "dataset": "mmlu_pro"}]))
    rep = evaluate("deepseek-r1", log_of(["ANSWER: B", "\\boxed{12}", "ANSWER: B"]),
                   refs, decode)
    assert rep.metrics["exact_match"] == pytest.approx(200 / 3)
    refs = load_references("gpt-oss-120b", refs_file(tmp_path, [
        {"ground_truth": "B", "dataset": "gpqa_diamond"},
        {"ground_truth": "12", "dataset": "aime25"}]))
    rep = evaluate("gpt-oss-120b", log_of(["B", "Answer: 5"]), refs, decode)
    # (1/5 + 0/8) / (1/5 + 1/8) x 100
    assert rep.metrics["exact_match"] == round((1 / 5) / (1 / 5 + 1 / 8) * 100, 3)
