"""The findings that name the real cause, with hand-computed figures.

- ``client_saturation`` blames tokenmark only when its own process demanded a core (CPU
  plus run-queue wait) while its loop lagged: a loop starved by other processes passes it,
  and ``machine_busy`` (a warning, never INVALID) names the other load instead.
- ``send_lag`` advice names the cause that was measured.
- ``input_length_agreement``, ``output_length`` and ``stream_usage_agreement`` count what
  differs from the server's own numbers.
"""

from __future__ import annotations

from tokenmark.metrics.lengths import LengthTally
from tokenmark.mlperf.rules import (
    ClientStats,
    Finding,
    Validity,
    Verdict,
    VerdictKind,
    Verdicts,
    client_bottleneck,
    input_length_agreement,
    machine_busy,
    output_length,
    send_lag_advice,
    stream_usage_agreement,
    with_findings,
)
from tokenmark.records import RequestRecord, TokenSource

MS = 1_000_000


def valid() -> Verdicts:
    return Verdicts(Verdict(VerdictKind.MLPERF, Validity.NOT_APPLICABLE, ()),
                    Verdict(VerdictKind.TOKENMARK, Validity.VALID, ()), {})


def test_a_busy_machine_is_not_the_clients_fault():
    # the case: client at 3% of a core, others 1.99 cores of 2, loop lag 30 ms
    sat = client_bottleneck(0.03, 30 * MS, 100, background_cores=1.99)
    busy = machine_busy(1.99, 2, 0.03, 30 * MS)
    assert sat.passed and not busy.passed and busy.level == "warn"
    assert "1.99 of 2 cores" in busy.observed
    v = with_findings(valid(), [sat, busy])
    assert v.tokenmark.validity is Validity.VALID and v.tokenmark.failed == ()


def test_a_client_that_demands_a_core_and_lags_is_the_bottleneck():
    sat = client_bottleneck(0.97, 30 * MS, 100)
    assert not sat.passed and sat.level == "fail" and "--workers" in sat.advice
    assert with_findings(valid(), [sat]).tokenmark.validity is Validity.INVALID
    assert client_bottleneck(0.97, 3 * MS, 100).passed  # busy but punctual
    assert machine_busy(0.4, 2, 0.9, 0).passed  # 20% of the cores: not busy


def test_send_lag_advice_names_the_measured_cause():
    busy = send_lag_advice(ClientStats(own_cores=0.05, background_cores=1.9,
                                       loop_lag_p99_ns=25 * MS, connect_waits=0, cores=2))
    assert "other processes 1.90 cores of 2" in busy and "machine was busy" in busy
    own = send_lag_advice(ClientStats(own_cores=0.98, background_cores=0.1,
                                      loop_lag_p99_ns=25 * MS, connect_waits=0, cores=2))
    assert "own process was CPU-bound" in own
    waits = send_lag_advice(ClientStats(own_cores=0.2, background_cores=0.1,
                                        loop_lag_p99_ns=MS, connect_waits=12, cores=2))
    assert "12 sends waited" in waits and "spare-connections" in waits
    assert "lower the rate" in send_lag_advice(ClientStats())  # nothing measured
    # a pinned demo client beside 0.66 cores of other work (a fresh clone's make run):
    # not busy by the machine-wide share, but 12% of its ready time in the run queue
    held = send_lag_advice(ClientStats(own_cores=0.137, background_cores=0.661,
                                       loop_lag_p99_ns=3.4 * MS, connect_waits=0, cores=2,
                                       demand_fraction=0.104, runq_wait_fraction=0.0125))
    assert "waited for a CPU 12% of the time" in held
    assert "other work held the client's CPU" in held and "without a busy CPU" not in held
    quiet = send_lag_advice(ClientStats(own_cores=0.1, background_cores=0.01,
                                        loop_lag_p99_ns=3 * MS, connect_waits=0, cores=2,
                                        demand_fraction=0.082, runq_wait_fraction=0.0012))
    assert "without a busy CPU" in quiet  # 1.5% of its ready time: a normal wait


def test_input_lengths_are_compared_after_the_template_overhead():
    planned = [989, 500, 100, 100]
    # the case: the built-in tokenizer's 989 tokens were 3,180 to the server
    bad = input_length_agreement(planned, [3180 + 12, 500 + 12, 100 + 12, 100 + 12], 12)
    assert bad is not None and not bad.passed
    assert bad.observed.startswith("1 of 4 requests") and "planned 1001, server counted " \
        "3192 (+219%)" in bad.observed
    # 2% of 112 is 2.24 tokens: 114 passes, 115 does not
    ok = input_length_agreement([100], [114], 12)
    assert ok is not None and ok.passed
    one = input_length_agreement([100], [115], 12)
    assert one is not None and not one.passed
    loose = input_length_agreement([100] * 200, [115] + [112] * 199, 12, max_share=0.01)
    assert loose is not None and loose.passed  # 0.5% of requests off: within 1%
    assert input_length_agreement([], [], 0) is None


def test_short_answers_are_counted_by_finish_reason():
    f = output_length({"length": [25, 19], "": [128]}, 10)
    assert f is not None and not f.passed
    assert f.observed == ("3 of 10 answers that demanded an exact length were shorter; by "
                          "finish reason: no finish_reason: 1 (missing 128-128, median 128 "
                          "tokens); length: 2 (missing 19-25, median 25 tokens)")
    ok = output_length({}, 10)
    assert ok is not None and ok.passed
    assert output_length({}, 0) is None


def test_usage_against_the_streamed_tokens():
    bad = stream_usage_agreement(8, 4, 0, 0)
    assert bad is not None and not bad.passed
    assert bad.observed.startswith("4 of 8 requests with exact per-event counts")
    over = stream_usage_agreement(0, 0, 5, 1)
    assert over is not None and not over.passed
    assert stream_usage_agreement(3, 0, 2, 0).passed  # type: ignore[union-attr]


def rec(seq: int, **kw: object) -> RequestRecord:
    r = RequestRecord(seq=seq, query_id=seq, sample_index=seq, scheduled_ns=0, done_ns=10,
                      token_source=TokenSource.USAGE)
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_the_tally_feeds_the_findings_from_records():
    t = LengthTally()
    t.add(rec(0, input_tokens=100, server_input_tokens=101, output_tokens=128,
              demanded_output_tokens=128, stream_tokens=128, token_basis="events",
              finish_reason="length"))
    t.add(rec(1, input_tokens=100, server_input_tokens=300, output_tokens=7,
              demanded_output_tokens=32, stream_tokens=7, token_basis="usage",
              finish_reason=""))
    t.add(rec(2, input_tokens=50, output_tokens=21, stream_tokens=16,
              token_basis="events"))  # usage:5 on a one-token-per-event server
    found: dict[str, Finding] = {f.rule: f for f in t.findings(1)}
    assert found["input_length_agreement"].observed.startswith("1 of 2 requests")
    assert found["output_length"].observed.startswith("1 of 2 answers")
    assert "no finish_reason: 1 (missing 25-25" in found["output_length"].observed
    assert found["stream_usage_agreement"].observed.startswith(
        "1 of 2 requests with exact per-event counts disagree")
    assert t.to_json()["short_answers"] == {"none": 1}


def test_a_recounted_answer_is_short_only_beyond_the_tokenizers_slack():
    """A count re-encoded from the text may differ by a token at the edges: 2% + 1."""
    t = LengthTally()
    for seq, out in enumerate((128, 126, 125, 124)):  # floor: 128 - 1 - 2 = 125
        t.add(rec(seq, output_tokens=out, demanded_output_tokens=128, stream_tokens=out,
                  token_source=TokenSource.TOKENIZER, token_basis="chunks",
                  finish_reason="length"))
    t.add(rec(9, output_tokens=127, demanded_output_tokens=128, stream_tokens=127,
              token_basis="events", finish_reason="length"))  # the server's own count
    assert dict(t.short) == {"length": [4, 1]}
