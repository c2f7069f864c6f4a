"""Issue 27 item 9: a warning before a run that LoadGen's rules make much longer than asked."""

from __future__ import annotations

from typer.testing import CliRunner

from tokenmark.cli import app
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.scenarios import build_schedule, length_note
from tokenmark.mlperf.settings import Scenario, effective


def note_for(scenario: Scenario, profile: str, **overrides):
    layered = build_settings("v6.0", "llama3.1-8b", scenario, profile=profile,
                             overrides=overrides)
    n = layered.settings.total_sample_count
    eff = effective(layered.settings, n)
    return length_note(eff, build_schedule(eff, n))


def test_min_queries_40_at_1_qps_becomes_the_whole_loaded_set():
    # the demo's loaded set is 256 samples; equal-issue mode pads 40 queries up to 256,
    # Poisson arrivals at 1/s: 256 queries span about 256 s (sd 16 s)
    note = note_for(Scenario.SERVER, "demo", min_query_count=40, target_qps=1.0)
    assert note is not None
    assert (note.asked_queries, note.planned_queries, note.loaded_set) == (40, 256, 256)
    assert note.asked_s == 40.0  # 40 queries at 1/s, longer than the 20 s minimum
    assert 256 - 5 * 16 < note.planned_s < 256 + 5 * 16
    text = note.message()
    assert "256 queries" in text and "40 queries" in text and "--dataset-size" in text


def test_mlperf_server_at_one_qps_is_hours_not_ten_minutes():
    # 13,368 samples (the CNN/DailyMail set) issued whole at 1 query/s: ~3.7 h
    note = note_for(Scenario.SERVER, "mlperf")
    assert note is not None and note.planned_queries == 13368
    assert 3 * 3600 < note.planned_s < 4.5 * 3600 and note.asked_s == 600.0
    assert " h " in note.message()


def test_no_note_when_the_plan_is_close_to_what_was_asked():
    # demo: 256 queries at 20/s would take 12.8 s < 20 s, so a second pass (512): ~25.6 s,
    # 1.28x the 20 s asked, under the 1.5x threshold
    assert note_for(Scenario.SERVER, "demo") is None
    assert note_for(Scenario.OFFLINE, "demo") is None
    assert note_for(Scenario.SERVER, "demo", mode="accuracy") is None


def test_run_prints_the_warning_before_the_run(tmp_path):
    res = CliRunner().invoke(app, [
        "run", "--profile", "demo", "--sut", "null", "--virtual-time", "--min-queries", "40",
        "--qps", "1", "--no-db", "--progress", "off", "-o", str(tmp_path / "o")])
    assert res.exit_code in (0, 1), res.output
    out = " ".join(res.output.split())
    warning = out.index("LoadGen's rules make this run 256 queries")
    assert warning < out.index("Latency (ms)")  # before the run's results
