"""ROUGE as the MLPerf references compute it: known values, stemming, sentence splitting.

Expected values are independent of the code under test: n-gram overlaps counted by hand
in the comments, and the published example of ``rouge-score``'s README (fox/dog:
ROUGE-1 F 0.70588). The splitter measurement compares NLTK's own Punkt class, loaded with
the English model's parameters (what ``nltk.sent_tokenize`` runs once ``punkt_tab`` is
downloaded), against the splitters tokenmark can use here, on a 120-pair fixture of
English prose (module docstrings of the standard library, each paired with a
deterministic perturbation of itself), and asserts the measured bounds reported in
:mod:`tokenmark.scoring.rouge`.
"""

from __future__ import annotations

import importlib
import random
from collections import defaultdict

import pytest

from tokenmark.scoring.rouge import postprocess, rouge
from tokenmark.scoring.sentences import rule_split, split_sentences

pytest.importorskip("rouge_score")


def test_hand_counted_overlaps():
    # pred: the cat sat on the mat / ref: the cat lay on the mat
    # unigrams shared: the x2, cat, on, mat = 5 of 6 each side -> F = 5/6
    # bigrams: the-cat, on-the, the-mat shared = 3 of 5 -> F = 0.6
    # LCS: the cat on the mat = 5 -> F = 5/6
    r = rouge(["the cat sat on the mat"], ["the cat lay on the mat"])
    assert r.scores == {"rouge1": 83.3333, "rouge2": 60.0, "rougeL": 83.3333,
                        "rougeLsum": 83.3333}
    assert r.gen_len == len("the cat sat on the mat")


def test_published_rouge_score_example():
    # rouge-score README: target "The quick brown fox jumps over the lazy dog",
    # prediction "The quick brown dog jumps on the log." -> rouge1 F 0.7058823529411765,
    # rougeL F 0.5882 (LCS the quick brown jumps the = 5: P 5/8, R 5/9)
    r = rouge(["The quick brown dog jumps on the log."],
              ["The quick brown fox jumps over the lazy dog"])
    assert r.scores["rouge1"] == 70.5882 and r.scores["rougeL"] == 58.8235


def test_stemming_is_on():
    # Porter stems tokens longer than 3 characters: running -> run, dogs -> dog
    assert rouge(["running dogs"], ["run dog"]).scores["rouge1"] == 100.0


def test_lsum_scores_sentence_by_sentence():
    # sentences swapped: one LCS over the whole text is 3 of 6 tokens (50), but per
    # sentence (the references split with a sentence tokenizer) every token matches
    r = rouge(["Dogs eat bones. Cats chase mice."], ["Cats chase mice. Dogs eat bones."])
    assert r.scores["rougeL"] == 50.0 and r.scores["rougeLsum"] == 100.0


def test_mean_over_samples_rounded_to_4_places():
    r = rouge(["a b c", "x y z"], ["a b c", "a b c"])
    assert r.scores["rouge1"] == 50.0


def test_preprocessing_strips_and_joins_sentences_with_newlines():
    assert postprocess(["  One. Two!  "]) == ["One.\nTwo!"]


def _fixture() -> list[tuple[str, str]]:
    names = ["argparse", "ast", "asyncio", "base64", "bisect", "calendar", "csv",
             "dataclasses", "decimal", "difflib", "email", "enum", "fractions", "functools",
             "gettext", "heapq", "hmac", "html", "http", "inspect", "ipaddress", "json",
             "locale", "logging", "mailbox", "math", "mimetypes", "operator", "optparse",
             "pathlib", "pickle", "pprint", "queue", "random", "re", "sched", "shlex",
             "shutil", "smtplib", "socket", "statistics", "string", "subprocess", "tarfile",
             "tempfile", "textwrap", "threading", "timeit", "tokenize", "traceback",
             "typing", "unittest", "urllib", "uuid", "warnings", "weakref", "zipfile",
             "zoneinfo", "contextlib", "collections"]
    rng = random.Random(20261202)
    pairs = []
    for name in names:
        doc = " ".join((importlib.import_module(name).__doc__ or "").split())
        if len(doc) < 80:
            continue
        sents = rule_split(doc)
        for _ in range(4):
            words = doc.split()
            kept = [w for w in words if rng.random() > 0.15]
            pred = " ".join(kept[: max(10, len(kept) * 2 // 3)])
            pairs.append((pred, " ".join(rng.sample(sents, len(sents)))))
    return pairs[:120]


def _nltk_punkt():
    punkt = pytest.importorskip("punkt")
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    m = punkt.load_model("english")
    p = PunktParameters()
    p.abbrev_types = set(m.abbrev_types)
    p.collocations = set(m.collocations)
    p.sent_starters = set(m.sent_starters)
    p.ortho_context = defaultdict(int, m.ortho_context)
    return PunktSentenceTokenizer(p)


def test_splitter_differences_measured():
    pairs = _fixture()
    assert len(pairs) >= 100
    nltk_tok = _nltk_punkt()
    preds = [p for p, _ in pairs]
    refs = [r for _, r in pairs]
    # the punkt package splits every text exactly as NLTK's Punkt with the same model
    for t in preds + refs:
        assert split_sentences(t, "punkt-package") == nltk_tok.tokenize(t)
    ref_pack = rouge(preds, refs, splitter_name="punkt-package")
    rules = rouge(preds, refs, splitter_name="tokenmark-rules")
    for k in ("rouge1", "rouge2", "rougeL"):
        assert rules.scores[k] == ref_pack.scores[k]
    d_lsum = abs(rules.scores["rougeLsum"] - ref_pack.scores["rougeLsum"])
    d_len = abs(rules.gen_len - ref_pack.gen_len) / ref_pack.gen_len
    print(f"\nrougeLsum punkt {ref_pack.scores['rougeLsum']} rules "
          f"{rules.scores['rougeLsum']} (delta {d_lsum:.4f}); gen_len punkt "
          f"{ref_pack.gen_len} rules {rules.gen_len} (rel {d_len:.2e})")
    assert d_lsum <= 0.5 and d_len <= 1e-3
