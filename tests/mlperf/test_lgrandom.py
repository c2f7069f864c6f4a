"""tokenmark.mlperf.lgrandom against libstdc++ itself, and its fast paths against plain loops.

The ground truth for the random primitives is a small C++ program compiled with the
local g++ (12 on every machine of this project, libstdc++ >= 11, so Lemire's
``uniform_int_distribution``) at test time; it prints what ``std::mt19937``,
``std::uniform_int_distribution``, ``std::shuffle``, ``std::exponential_distribution``
and ``std::generate_canonical`` give for the same seeds. ``generate_queries`` is checked
against a literal, draw-by-draw transcription of LoadGen's generation loop here, and
against the official LoadGen in ``tests/mlperf/test_lgrandom_loadgen.py``.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tokenmark.errors import ConfigError
from tokenmark.mlperf import lgrandom
from tokenmark.mlperf.lgrandom import MT19937, UniformIntMethod
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
    effective,
)

LEMIRE = UniformIntMethod.LEMIRE
SCALING = UniformIntMethod.SCALING
MLPERF_SEEDS = (2085463073848966840, 2747215439041700203, 16159082839903944936)
SEEDS = [0, 1, 5489, 2**32 - 1, 2**32, 2**32 + 5489, 2**64 - 1, *MLPERF_SEEDS]
U64 = st.integers(min_value=0, max_value=2**64 - 1)

# Each input line is "<command> <seed> <args...>" on a freshly seeded std::mt19937; each
# output line holds the results, then "|" and the engine's next output (which shows
# how many outputs the command consumed).
ORACLE_CC = r"""
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

template <typename Int>
void uniform(std::mt19937& rng, Int lo, Int hi, long count) {
  std::uniform_int_distribution<Int> dist(lo, hi);
  for (long i = 0; i < count; ++i) std::cout << dist(rng) << ' ';
}

int main() {
  std::string cmd;
  unsigned long long seed;
  while (std::cin >> cmd >> seed) {
    std::mt19937 rng(seed);
    if (cmd == "raw") {
      long count;
      std::cin >> count;
      for (long i = 0; i < count; ++i) std::cout << rng() << ' ';
    } else if (cmd == "int") {
      int lo, hi;
      long count;
      std::cin >> lo >> hi >> count;
      uniform<int>(rng, lo, hi, count);
    } else if (cmd == "llong") {
      long long lo, hi;
      long count;
      std::cin >> lo >> hi >> count;
      uniform<long long>(rng, lo, hi, count);
    } else if (cmd == "ulong") {
      unsigned long lo, hi;
      long count;
      std::cin >> lo >> hi >> count;
      uniform<unsigned long>(rng, lo, hi, count);
    } else if (cmd == "shuffle") {
      std::size_t n, lo, hi;
      std::cin >> n >> lo >> hi;
      std::vector<std::size_t> v(n);
      std::iota(v.begin(), v.end(), 0);
      std::shuffle(v.begin() + lo, v.begin() + hi, rng);
      for (auto x : v) std::cout << x << ' ';
    } else if (cmd == "exponential") {
      double rate;
      long count;
      std::cin >> rate >> count;
      std::exponential_distribution<> dist(rate);
      for (long i = 0; i < count; ++i) {
        auto d = std::chrono::duration<double>(dist(rng));
        std::cout << std::chrono::duration_cast<std::chrono::nanoseconds>(d).count() << ' ';
      }
    } else if (cmd == "canonical") {
      long count;
      std::cin >> count;
      for (long i = 0; i < count; ++i) {
        std::printf("%a ", std::generate_canonical<double, 53>(rng));
        std::fflush(stdout);
      }
    }
    std::cout << "| " << rng() << std::endl;
  }
}
"""

Oracle = Callable[[list[str]], list[tuple[list[str], int]]]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    """Compile the libstdc++ oracle once; return a function that runs command lines."""
    gxx = shutil.which("g++")
    assert gxx is not None, "g++ is needed to check lgrandom against libstdc++"
    work = tmp_path_factory.mktemp("oracle")
    (work / "oracle.cc").write_text(ORACLE_CC)
    exe = work / "oracle"
    subprocess.run(
        [gxx, "-O2", "-std=c++14", "-o", str(exe), str(work / "oracle.cc")],
        check=True,
        capture_output=True,
    )

    def run(lines: list[str]) -> list[tuple[list[str], int]]:
        proc = subprocess.run(
            [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
        )
        results = []
        for line in proc.stdout.splitlines():
            values, _, after = line.partition("|")
            results.append((values.split(), int(after)))
        assert len(results) == len(lines)
        return results

    return run


# ---------------------------------------------------------------------- engine


def test_mt19937_matches_std_mt19937(oracle: Oracle) -> None:
    # 3000 outputs cross several 624-word twists and the 2048-word buffer refills
    results = oracle([f"raw {seed} 3000" for seed in SEEDS])
    for seed, (values, _) in zip(SEEDS, results, strict=True):
        rng = MT19937(seed)
        assert [rng.next_u32() for _ in range(3000)] == [int(v) for v in values], seed


def test_mt19937_known_values() -> None:
    # The C++ standard requires the 10000th output of a default-seeded mt19937.
    rng = MT19937(5489)
    assert int(rng.take(10000)[-1]) == 4123659995


def test_mt19937_keeps_the_low_32_bits_of_the_seed() -> None:
    for seed in MLPERF_SEEDS:
        assert MT19937(seed).take(700).tolist() == MT19937(seed % 2**32).take(700).tolist()


@given(seed=U64, steps=st.lists(st.tuples(st.sampled_from("ntps"), st.integers(0, 3000))))
@settings(max_examples=60, deadline=None)
def test_mt19937_scalar_and_bulk_reads_share_one_stream(
    seed: int, steps: list[tuple[str, int]]
) -> None:
    reference = MT19937(seed).take(sum(k for _, k in steps) + 1).tolist()
    rng = MT19937(seed)
    got: list[int] = []
    for kind, k in steps:
        if kind == "n":
            got.extend(rng.next_u32() for _ in range(min(k, 50)))
        elif kind == "t":
            got.extend(rng.take(k).tolist())
        elif kind == "p":
            assert rng.peek(k).tolist() == reference[len(got) : len(got) + k]
        else:
            got.extend(rng.peek(k).tolist())
            rng.skip(k)
    assert got == reference[: len(got)]
    assert rng.next_u32() == reference[len(got)]


def test_mt19937_rejects_seeds_outside_64_bits() -> None:
    with pytest.raises(ConfigError):
        MT19937(-1)
    with pytest.raises(ConfigError):
        MT19937(2**64)


# --------------------------------------------------------------- uniform ints

UNIFORM_CASES: list[tuple[str, int, int]] = [
    ("int", 0, 0),
    ("int", 0, 1),
    ("int", 0, 9),
    ("int", 0, 49),
    ("int", 0, 13367),
    ("int", -5, 5),
    ("int", 0, 2**31 - 2),
    ("int", -(2**31), 2**31 - 1),  # 2**32 - 1 values: one raw output each
    ("llong", 0, 2**32 - 2),
    ("llong", 0, 2**32),  # upscaling
    ("llong", -(2**40), 2**40),
    ("llong", -(2**63), 2**63 - 1),  # the full 64-bit range
    ("ulong", 0, 65535 * 65536 - 1),  # shuffle's largest paired draw
    ("ulong", 0, 2**64 - 1),
]


@pytest.mark.parametrize(("ctype", "lo", "hi"), UNIFORM_CASES)
def test_uniform_int_matches_libstdcxx(oracle: Oracle, ctype: str, lo: int, hi: int) -> None:
    count = 400
    results = oracle([f"{ctype} {seed} {lo} {hi} {count}" for seed in SEEDS])
    for seed, (values, after) in zip(SEEDS, results, strict=True):
        rng = MT19937(seed)
        assert [lgrandom.uniform_int(rng, lo, hi) for _ in range(count)] == [int(v) for v in values]
        assert rng.next_u32() == after  # consumed exactly as many outputs

        rng = MT19937(seed)
        bulk = lgrandom.uniform_int_array(rng, lo, hi, count) if hi - lo < 2**63 else None
        if bulk is not None:
            assert bulk.tolist() == [int(v) for v in values]
            assert rng.next_u32() == after


@given(
    seed=U64,
    span=st.one_of(st.integers(0, 100), st.integers(0, 2**32 - 1), st.integers(0, 2**40)),
    lo=st.integers(-(2**20), 2**20),
    count=st.integers(0, 300),
    method=st.sampled_from(UniformIntMethod),
)
@settings(max_examples=150, deadline=None)
def test_uniform_int_array_is_the_scalar_loop(
    seed: int, span: int, lo: int, count: int, method: UniformIntMethod
) -> None:
    scalar_rng, bulk_rng = MT19937(seed), MT19937(seed)
    expected = [lgrandom.uniform_int(scalar_rng, lo, lo + span, method) for _ in range(count)]
    got = lgrandom.uniform_int_array(bulk_rng, lo, lo + span, count, method)
    assert got.tolist() == expected
    assert all(lo <= v <= lo + span for v in expected)
    assert bulk_rng.next_u32() == scalar_rng.next_u32()


def test_uniform_int_methods_differ_only_by_the_downscaling_rule() -> None:
    """Both methods are unbiased; they map many draws differently for large ranges."""
    span = 100_000
    for method in UniformIntMethod:
        draws = lgrandom.uniform_int_array(MT19937(42), 0, span - 1, 50_000, method)
        counts = np.bincount(draws // 10_000, minlength=10)
        assert counts.min() > 4500 and counts.max() < 5500
    lemire = lgrandom.uniform_int_array(MT19937(42), 0, span - 1, 1000, LEMIRE)
    scaling = lgrandom.uniform_int_array(MT19937(42), 0, span - 1, 1000, SCALING)
    assert (lemire != scaling).any()
    # for a small range they nearly always agree: floor(u * 10 / 2**32) vs u // 429496729
    assert lgrandom.uniform_int(MT19937(7), 0, 9, LEMIRE) == lgrandom.uniform_int(
        MT19937(7), 0, 9, SCALING
    )


def test_uniform_int_rejects_empty_ranges() -> None:
    with pytest.raises(ValueError):
        lgrandom.uniform_int(MT19937(1), 5, 4)
    with pytest.raises(ValueError):
        lgrandom.uniform_int_array(MT19937(1), 0, 2**64, 3)


# ------------------------------------------------------------------- shuffle

# <= 65535 elements draw two positions per uniform_int; more draw one each
SHUFFLE_SIZES = [1, 2, 3, 4, 10, 11, 50, 1000, 1001, 13368, 65535, 65536, 100_001]


@pytest.mark.parametrize("n", SHUFFLE_SIZES)
def test_shuffle_matches_std_shuffle(oracle: Oracle, n: int) -> None:
    seeds = SEEDS if n <= 20_000 else SEEDS[:3]
    results = oracle([f"shuffle {seed} {n} 0 {n}" for seed in seeds])
    for seed, (values, after) in zip(seeds, results, strict=True):
        rng = MT19937(seed)
        items = list(range(n))
        lgrandom.shuffle(items, rng)
        assert items == [int(v) for v in values]
        assert rng.next_u32() == after


def test_shuffle_of_a_subrange_matches(oracle: Oracle) -> None:
    ranges = [(100, 0, 0), (100, 10, 11), (100, 10, 12), (100, 3, 97), (70_000, 1, 69_999)]
    results = oracle([f"shuffle 99 {n} {lo} {hi}" for n, lo, hi in ranges])
    for (n, lo, hi), (values, after) in zip(ranges, results, strict=True):
        rng = MT19937(99)
        items = list(range(n))
        lgrandom.shuffle(items, rng, lo, hi)
        assert items == [int(v) for v in values]
        assert rng.next_u32() == after


@given(
    seed=U64,
    items=st.lists(st.integers(), max_size=300),
    method=st.sampled_from(UniformIntMethod),
)
@settings(max_examples=100, deadline=None)
def test_shuffle_permutes(seed: int, items: list[int], method: UniformIntMethod) -> None:
    shuffled = list(items)
    lgrandom.shuffle(shuffled, MT19937(seed), method=method)
    assert sorted(shuffled) == sorted(items)


def test_shuffle_rejects_bad_ranges() -> None:
    with pytest.raises(ValueError):
        lgrandom.shuffle([1, 2, 3], MT19937(1), 2, 1)
    with pytest.raises(ValueError):
        lgrandom.shuffle([1, 2, 3], MT19937(1), 0, 4)


# ----------------------------------------------------------- real distributions


def test_generate_canonical_matches(oracle: Oracle) -> None:
    results = oracle([f"canonical {seed} 2000" for seed in SEEDS])
    for seed, (values, after) in zip(SEEDS, results, strict=True):
        rng = MT19937(seed)
        assert [lgrandom.generate_canonical(rng) for _ in range(2000)] == [
            float.fromhex(v) for v in values
        ]
        assert rng.next_u32() == after


def test_generate_canonical_stays_below_one() -> None:
    class AllOnes(MT19937):
        def next_u32(self) -> int:
            return 2**32 - 1

    assert lgrandom.generate_canonical(AllOnes(0)) == math.nextafter(1.0, 0.0)


@pytest.mark.parametrize("rate", [1.0, 0.37, 100.0, 2000.0, 29.5, 12345.678, 1e6])
def test_exponential_ns_matches(oracle: Oracle, rate: float) -> None:
    results = oracle([f"exponential {seed} {rate!r} 3000" for seed in SEEDS])
    for seed, (values, after) in zip(SEEDS, results, strict=True):
        expected = [int(v) for v in values]
        rng = MT19937(seed)
        assert [lgrandom.exponential_ns(rng, rate) for _ in range(3000)] == expected
        assert rng.next_u32() == after
        bulk_rng = MT19937(seed)
        assert lgrandom.exponential_ns_array(bulk_rng, rate, 3000).tolist() == expected
        assert bulk_rng.next_u32() == after


# -------------------------------------------------------------- loadable sets


def test_loadable_sets_cut_and_pad() -> None:
    sets = lgrandom.loadable_sets(23, 10, 7, padding=3)
    order = list(range(23))
    lgrandom.shuffle(order, MT19937(7))
    assert [s[: len(s) - 3] for s in sets] == [order[0:10], order[10:20], order[20:23]]
    assert [s[-3:] for s in sets] == [order[0:3], order[10:13], order[20:23]]
    tiny = lgrandom.loadable_sets(2, 10, 7, padding=5)  # padding longer than the set
    assert tiny[0][2:] == [tiny[0][0], tiny[0][1]] * 2 + [tiny[0][0]]


def test_loadable_sets_for_modes() -> None:
    eff = make_eff(Scenario.MULTI_STREAM, Mode.ACCURACY, total=25, psc=10, min_query_count=1)
    pairs = lgrandom.loadable_sets_for(eff)
    assert [end for _, end in pairs] == [10, 10, 5]
    assert all(len(s) == end + 7 for s, end in pairs)
    perf = lgrandom.loadable_sets_for(dataclasses.replace(eff, mode=Mode.PERFORMANCE))
    assert len(perf) == 1 and sorted(perf[0][0][:10]) == list(range(10))


def test_loadable_sets_rejects_nonsense() -> None:
    with pytest.raises(ConfigError):
        lgrandom.loadable_sets(10, 0, 1)


# ---------------------------------------------------------------- queries


def make_eff(
    scenario: Scenario,
    mode: Mode = Mode.PERFORMANCE,
    *,
    total: int = 50,
    psc: int = 50,
    equal_issue: bool = False,
    seeds: tuple[int, int, int] = MLPERF_SEEDS,
    min_duration_ms: int = 100,
    min_query_count: int = 10,
    rate: float = 1000.0,
    spq: int = 8,
) -> EffectiveSettings:
    requested = TestSettings(
        round="v6.1",
        benchmark="test",
        scenario=scenario,
        seeds=Seeds(*seeds),
        mode=mode,
        target_qps=rate,
        offline_expected_qps=rate,
        single_stream_expected_latency_ns=max(1, round(1e9 / rate)),
        multi_stream_expected_latency_ns=max(1, round(1e9 / rate)),
        multi_stream_samples_per_query=spq,
        min_duration_ms=min_duration_ms,
        min_query_count=min_query_count,
        performance_sample_count=psc,
        total_sample_count=total,
        sample_concatenate_permutation=equal_issue,
    )
    return effective(requested, total)


def reference_generate(
    eff: EffectiveSettings,
    loaded: list[int],
    end: int,
    unique: bool = False,
    same: bool = False,
    same_index: int = 0,
    method: UniformIntMethod = LEMIRE,
) -> tuple[list[tuple[int, list[int]]], int, int]:
    """LoadGen's GenerateQueries transcribed draw by draw with the scalar primitives.

    Returns ``([(scheduled_ns, samples), ...], samples_per_query, duration_ns)``. It
    fails the way LoadGen does (an exhausted or empty distribution raises).
    """
    scenario = eff.scenario.loadgen
    server = scenario is Scenario.SERVER
    offline = scenario is Scenario.OFFLINE
    multi = scenario is Scenario.MULTI_STREAM
    accuracy = eff.mode is Mode.ACCURACY
    size = len(loaded)

    gen = eff.target_duration_ns * (1 if server else 2)
    min_queries = eff.min_query_count
    spq = eff.samples_per_query
    if offline and unique:
        spq = eff.performance_sample_count
    if accuracy and offline:
        spq = end
    if accuracy or unique:
        gen = 0
        min_queries = size // spq

    sample_rng = MT19937(eff.seeds.sample_index)
    schedule_rng = MT19937(eff.seeds.schedule)
    stride = spq if multi else 1

    def shuffled_starts() -> Iterator[int]:
        starts = list(range(0, end, stride))
        lgrandom.shuffle(starts, sample_rng, method=method)
        return iter(starts)

    accuracy_starts = shuffled_starts() if accuracy else iter(())

    def sample_distribution() -> int:
        if accuracy:
            return next(accuracy_starts)
        return lgrandom.uniform_int(sample_rng, 0, end - 1, method)

    unique_starts = shuffled_starts()
    cycle: list[int] = []
    positions = list(range(size))
    j = 0
    while j < min_queries:
        lgrandom.shuffle(positions, sample_rng, method=method)
        cycle.extend(positions)
        j += size
    cycle_i = 0

    equal_issue = eff.sample_concatenate_permutation
    if not accuracy and equal_issue:
        if offline and spq % size != 0:
            spq += size - spq % size
        elif not offline and min_queries % size != 0:
            min_queries += size - min_queries % size

    period = int(1.0 / eff.target_qps * 1e9)
    queries: list[tuple[int, list[int]]] = []
    timestamp = prev = 0
    while prev < gen or len(queries) < min_queries:
        if multi:
            i = next(unique_starts) if unique else same_index if same else sample_distribution()
            samples = [loaded[i + k] for k in range(spq)]
        elif offline:
            repeats, remainder = divmod(spq, size)
            if same:
                samples = [loaded[same_index]] * spq
            else:
                samples = []
                for _ in range(repeats):
                    block = list(loaded)
                    if equal_issue:
                        lgrandom.shuffle(block, sample_rng, method=method)
                    samples.extend(block)
                samples.extend(loaded[:remainder])
        else:
            samples = []
            for _ in range(spq):
                if unique:
                    i = next(unique_starts)
                elif same:
                    i = same_index
                elif equal_issue:
                    i = cycle[cycle_i % len(cycle)]
                    cycle_i += 1
                else:
                    i = sample_distribution()
                samples.append(loaded[i])
        queries.append((timestamp, samples))
        prev = timestamp
        timestamp += lgrandom.exponential_ns(schedule_rng, eff.target_qps) if server else period
        if equal_issue and len(queries) >= min_queries and prev < gen and not offline:
            min_queries += size
    if offline and accuracy and size % spq:
        queries.append((timestamp, [loaded[sample_distribution()] for _ in range(size % spq)]))
    return queries, spq, timestamp


def assert_same_as_reference(
    eff: EffectiveSettings, loaded: list[int], end: int, **flags: Any
) -> lgrandom.GeneratedQueries:
    expected, spq, duration = reference_generate(eff, loaded, end, **flags)
    got = lgrandom.generate_queries(eff, loaded, end, **flags)
    assert got.samples_per_query == spq
    assert got.generated_query_duration_ns == duration
    assert got.generated_query_count == len(expected)
    assert got.scheduled_ns.tolist() == [t for t, _ in expected]
    assert got.query_sizes.tolist() == [len(s) for _, s in expected]
    assert got.sample_index.tolist() == [i for _, s in expected for i in s]
    offsets = got.query_offsets
    assert offsets[0] == 0 and offsets[-1] == got.sample_index.shape[0]
    return got


@st.composite
def generation_cases(draw: st.DrawFn) -> tuple[EffectiveSettings, list[int], int, dict[str, Any]]:
    scenario = draw(
        st.sampled_from(
            [
                Scenario.SERVER,
                Scenario.INTERACTIVE,
                Scenario.OFFLINE,
                Scenario.SINGLE_STREAM,
                Scenario.MULTI_STREAM,
            ]
        )
    )
    mode = draw(st.sampled_from(Mode))
    psc = draw(st.integers(1, 40))
    total = psc + draw(st.integers(0, 30))
    try:
        eff = make_eff(
            scenario,
            mode,
            total=total,
            psc=psc,
            equal_issue=draw(st.booleans()),
            seeds=(draw(U64), draw(U64), draw(U64)),
            min_duration_ms=draw(st.integers(0, 60)),
            min_query_count=draw(st.integers(0, 120)),
            rate=draw(st.floats(200.0, 3000.0)),
            spq=draw(st.integers(1, 8)),
        )
    except ConfigError:
        assume(False)
        raise
    pairs = lgrandom.loadable_sets_for(eff)
    loaded, end = pairs[draw(st.integers(0, len(pairs) - 1))]
    flag = draw(st.sampled_from(["", "unique", "same"]))
    flags: dict[str, Any] = {"method": draw(st.sampled_from(UniformIntMethod))}
    if flag == "unique":
        flags["unique"] = True
    elif flag == "same":
        flags["same"] = True
        flags["same_index"] = draw(st.integers(0, end - 1))
    return eff, loaded, end, flags


@given(generation_cases())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generate_queries_is_loadgens_loop(
    case: tuple[EffectiveSettings, list[int], int, dict[str, Any]],
) -> None:
    eff, loaded, end, flags = case
    kwargs = {
        "performance_issue_unique": flags.get("unique", False),
        "performance_issue_same": flags.get("same", False),
        "performance_issue_same_index": flags.get("same_index", 0),
        "method": flags["method"],
    }
    try:
        expected, spq, duration = reference_generate(eff, loaded, end, **flags)
    except (StopIteration, ZeroDivisionError, IndexError):
        event("LoadGen would fail")
        with pytest.raises(ConfigError):
            lgrandom.generate_queries(eff, loaded, end, **kwargs)
        return
    event(f"{eff.scenario.loadgen.value} {eff.mode.value}")
    event(f"equal issue {eff.sample_concatenate_permutation}")
    got = lgrandom.generate_queries(eff, loaded, end, **kwargs)
    assert got.samples_per_query == spq
    assert got.generated_query_duration_ns == duration
    assert got.scheduled_ns.tolist() == [t for t, _ in expected]
    assert got.query_sizes.tolist() == [len(s) for _, s in expected]
    assert got.sample_index.tolist() == [i for _, s in expected for i in s]


def test_server_equal_issue_pads_and_bumps_by_whole_sets() -> None:
    eff = make_eff(Scenario.SERVER, equal_issue=True, min_query_count=120, rate=2000.0)
    ((loaded, end),) = lgrandom.loadable_sets_for(eff)
    got = lgrandom.generate_queries(eff, loaded, end)
    assert got.generated_query_count % 50 == 0
    assert got.generated_query_count >= 150  # 120 padded to 150, then bumped for time
    assert got.scheduled_ns[-1] >= eff.target_duration_ns  # Server: 1x the duration
    assert got.scheduled_ns[-got.generated_query_count // 4] < eff.target_duration_ns
    # the cycle holds ceil(120 / 50) = 3 permutations of the set, then wraps around
    counts = np.bincount(got.sample_index, minlength=50)
    assert got.generated_query_count != 150 or counts.tolist() == [3] * 50


def test_offline_accuracy_remainder_query() -> None:
    """A loaded set longer than samples_per_query gets one shorter query at the end."""
    eff = make_eff(Scenario.OFFLINE, Mode.ACCURACY, total=30, psc=30)
    loaded = lgrandom.loadable_sets_for(eff)[0][0]
    got = assert_same_as_reference(eff, loaded, 12)
    assert got.query_sizes.tolist() == [12, 12, 6]
    assert got.scheduled_ns.tolist() == [0, 1_000_000, 2_000_000]
    assert sorted(got.sample_index[:24].tolist()) == sorted(loaded[:12] * 2)


def test_generated_queries_are_read_only() -> None:
    eff = make_eff(Scenario.SINGLE_STREAM)
    ((loaded, end),) = lgrandom.loadable_sets_for(eff)
    got = lgrandom.generate_queries(eff, loaded, end)
    with pytest.raises(ValueError):
        got.sample_index[0] = 1


def test_generate_queries_rejects_what_loadgen_cannot_run() -> None:
    server = make_eff(Scenario.SERVER, equal_issue=True, min_query_count=0)
    ((loaded, end),) = lgrandom.loadable_sets_for(server)
    with pytest.raises(ConfigError, match="min_query_count"):
        lgrandom.generate_queries(server, loaded, end)
    with pytest.raises(ConfigError, match="unique"):
        _exhaust_unique()
    with pytest.raises(ConfigError, match="performance_issue_same_index"):
        lgrandom.generate_queries(
            make_eff(Scenario.OFFLINE),
            loaded,
            end,
            performance_issue_same=True,
            performance_issue_same_index=50,
        )
    with pytest.raises(ConfigError, match="not an MLPerf scenario"):
        lgrandom.generate_queries(make_eff(Scenario.POISSON), loaded, end)
    with pytest.raises(ConfigError):
        lgrandom.generate_queries(server, [], 0)


def _exhaust_unique() -> None:
    """Unique MultiStream issue with a set whose starts run out before min_queries."""
    eff = make_eff(Scenario.MULTI_STREAM, psc=16, total=16, spq=8, equal_issue=True)
    ((loaded, end),) = lgrandom.loadable_sets_for(eff)
    lgrandom.generate_queries(eff, loaded, end, performance_issue_unique=True)


@pytest.mark.slow
def test_a_million_server_queries_in_seconds() -> None:
    eff = make_eff(
        Scenario.SERVER,
        total=13368,
        psc=13368,
        equal_issue=True,
        rate=1000.0,
        min_duration_ms=1_000_000,
        min_query_count=100,
    )
    ((loaded, end),) = lgrandom.loadable_sets_for(eff)
    start = time.perf_counter()
    got = lgrandom.generate_queries(eff, loaded, end)
    elapsed = time.perf_counter() - start
    assert got.generated_query_count >= 1_000_000
    assert elapsed < 10.0, f"{elapsed:.1f} s for {got.generated_query_count} queries"
