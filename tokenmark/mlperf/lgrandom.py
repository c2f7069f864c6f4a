"""LoadGen's randomness, bit for bit: ``std::mt19937`` and the libstdc++ algorithms on it.

MLPerf LoadGen draws every random choice of a run (which samples are loaded, the order
in which they are issued, the Server arrival times) from ``std::mt19937`` engines seeded
from ``mlperf.conf``, through libstdc++'s ``std::shuffle``,
``std::uniform_int_distribution`` and ``std::exponential_distribution``. A schedule is
only *the* MLPerf schedule if every one of those steps is reproduced exactly, so this
module re-implements them from the libstdc++ headers rather than using Python's or
numpy's own distributions (which are different algorithms and give different numbers):

* :class:`MT19937` is ``std::mt19937 rng(seed)``;
* :func:`uniform_int`, :func:`shuffle`, :func:`exponential_ns` and
  :func:`generate_canonical` are the libstdc++ distributions on top of it;
* :func:`loadable_sets` and :func:`generate_queries` are LoadGen's
  ``GenerateLoadableSets`` and ``GenerateQueries<scenario, mode>`` over tokenmark's
  :class:`~tokenmark.mlperf.settings.EffectiveSettings`.

Which ``uniform_int_distribution`` algorithm a LoadGen build uses depends on the
libstdc++ it was compiled against (:class:`UniformIntMethod`). The official PyPI wheel
``mlcommons-loadgen==6.0.17`` is built with GCC 14 and uses Lemire's method, the default
here; ``tests/mlperf/test_lgrandom_loadgen.py`` proves it against the wheel, and
``tests/mlperf/test_lgrandom.py`` against programs compiled with the local g++.
"""

from __future__ import annotations

import math
from collections.abc import MutableSequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "DEFAULT_UNIFORM_METHOD",
    "MT19937",
    "GeneratedQueries",
    "UniformIntMethod",
    "exponential_ns",
    "exponential_ns_array",
    "generate_canonical",
    "generate_queries",
    "loadable_sets",
    "loadable_sets_for",
    "shuffle",
    "uniform_int",
    "uniform_int_array",
]

T = TypeVar("T")

_M32: Final = 0xFFFF_FFFF
_M64: Final = 0xFFFF_FFFF_FFFF_FFFF
_URNG_RANGE: Final = _M32  # mt19937::max() - mt19937::min()
_TWO32: Final = 4294967296.0
_TWO64: Final = 18446744073709551616.0
_BELOW_ONE: Final = math.nextafter(1.0, 0.0)


class UniformIntMethod(StrEnum):
    """How ``std::uniform_int_distribution`` scales a 32-bit draw down to a range.

    Both are unbiased, but they map the same engine output to different numbers, so
    the issue order of a run depends on the libstdc++ that LoadGen was built with.
    """

    LEMIRE = "lemire"
    """libstdc++ >= 11: Lemire's nearly-divisionless method (``_S_nd``), a 64-bit
    product of the draw and the range, keeping the high word."""

    SCALING = "scaling"
    """libstdc++ <= 10: divide by ``urngrange / range`` and reject draws past the last
    whole bucket."""


DEFAULT_UNIFORM_METHOD: Final = UniformIntMethod.LEMIRE
"""What the official ``mlcommons-loadgen`` 6.0.17 wheel uses (GCC 14, manylinux_2_28)."""


# --------------------------------------------------------------------------- engine


def _init_genrand(seed32: int) -> npt.NDArray[np.uint32]:
    """The 624-word state ``std::mt19937::seed(s)`` builds (Matsumoto's init_genrand)."""
    key = [0] * 624
    x = seed32
    key[0] = x
    for i in range(1, 624):
        x = (1812433253 * (x ^ (x >> 30)) + i) & _M32
        key[i] = x
    return np.asarray(key, dtype=np.uint32)


class MT19937:
    """``std::mt19937 rng(seed)`` for a LoadGen seed (an unsigned 64-bit integer).

    libstdc++'s ``mersenne_twister_engine::seed`` keeps ``seed mod 2**32``, so the
    64-bit seeds of ``mlperf.conf`` act through their low 32 bits only. The state is
    Matsumoto's ``init_genrand`` with the position at the end of the block, which is
    exactly where numpy's ``MT19937`` regenerates, so numpy produces the words and this
    class only buffers them: scalar draws (:meth:`next_u32`) read a Python list, bulk
    draws (:meth:`take`) slice an array, and both share one position so they can be
    mixed freely without changing the stream.
    """

    __slots__ = ("_arr", "_bitgen", "_lst", "_pos", "seed")

    _BLOCK: Final = 2048

    def __init__(self, seed: int) -> None:
        if not 0 <= seed <= _M64:
            raise ConfigError(f"LoadGen seeds are unsigned 64-bit integers (got {seed})")
        self.seed = seed
        bitgen = np.random.MT19937(0)
        bitgen.state = {
            "bit_generator": "MT19937",
            "state": {"key": _init_genrand(seed & _M32), "pos": 624},
        }
        self._bitgen = bitgen
        self._arr: npt.NDArray[np.uint64] = np.empty(0, dtype=np.uint64)
        self._lst: list[int] | None = None
        self._pos = 0

    def _fill(self, n: int) -> None:
        """Make at least ``n`` unread words available (keeping the unread tail)."""
        tail = self._arr[self._pos :]
        extra = self._bitgen.random_raw(max(n - tail.shape[0], self._BLOCK))
        self._arr = np.concatenate((tail, np.asarray(extra, dtype=np.uint64)))
        self._lst = None
        self._pos = 0

    def next_u32(self) -> int:
        """The next ``rng()`` output, in ``[0, 2**32)``."""
        lst = self._lst
        pos = self._pos
        if lst is None or pos >= len(lst):
            if pos >= self._arr.shape[0]:
                self._fill(1)
                pos = 0
            lst = self._lst = self._arr.tolist()
        self._pos = pos + 1
        return lst[pos]

    def peek(self, n: int) -> npt.NDArray[np.uint64]:
        """The next ``n`` outputs without consuming them (a read-only view)."""
        if self._arr.shape[0] - self._pos < n:
            self._fill(n)
        view = self._arr[self._pos : self._pos + n]
        view.flags.writeable = False
        return view

    def skip(self, n: int) -> None:
        """Consume ``n`` outputs (after :meth:`peek` told how many were used)."""
        if self._arr.shape[0] - self._pos < n:
            self._fill(n)
        self._pos += n

    def take(self, n: int) -> npt.NDArray[np.uint64]:
        """The next ``n`` outputs, consumed (a fresh array)."""
        out = self.peek(n).copy()
        self._pos += n
        return out


# ------------------------------------------------------------------- distributions


def _uniform_offset(rng: MT19937, urange: int, method: UniformIntMethod) -> int:
    """libstdc++ ``uniform_int_distribution::operator()`` for ``[0, urange]``.

    The arithmetic type is ``unsigned long`` (64 bits), the common type of mt19937's
    ``uint_fast32_t`` result and the distribution's unsigned type, on x86-64 Linux.
    """
    if urange < _URNG_RANGE:  # downscaling
        uerange = urange + 1
        nxt = rng.next_u32
        if method is UniformIntMethod.LEMIRE:
            # _S_nd<uint64_t>(urng, uint32_t(uerange)): accept the first draw whose
            # low product word is >= (2**32 - range) % range; the first test against
            # `range` in libstdc++ is a shortcut with the same outcome.
            threshold = (0x1_0000_0000 - uerange) % uerange
            while True:
                product = nxt() * uerange
                if product & _M32 >= threshold:
                    return product >> 32
        scaling = _URNG_RANGE // uerange
        past = uerange * scaling
        while True:
            ret = nxt()
            if ret < past:
                return ret // scaling
    if urange == _URNG_RANGE:
        return rng.next_u32()
    # upscaling: (2**32) * high + low, rejecting values past the range or wrapped
    while True:
        tmp = 0x1_0000_0000 * _uniform_offset(rng, urange >> 32, method)
        ret = (tmp + rng.next_u32()) & _M64
        if ret <= urange and ret >= tmp:
            return ret


def uniform_int(
    rng: MT19937, a: int, b: int, method: UniformIntMethod = DEFAULT_UNIFORM_METHOD
) -> int:
    """``std::uniform_int_distribution<T>{a, b}(rng)``: an integer in ``[a, b]``.

    Valid for any integer type ``T`` up to 64 bits (``b - a < 2**64``); the result does
    not depend on ``T``'s signedness on x86-64 Linux. Consumes one engine output per
    attempt (more than one only on a rejection), two or more for ranges above 2**32.
    """
    urange = b - a
    if not 0 <= urange <= _M64:
        raise ValueError(f"uniform_int needs a <= b within 64 bits (got [{a}, {b}])")
    return a + _uniform_offset(rng, urange, method)


def uniform_int_array(
    rng: MT19937,
    a: int,
    b: int,
    count: int,
    method: UniformIntMethod = DEFAULT_UNIFORM_METHOD,
) -> npt.NDArray[np.int64]:
    """``count`` successive :func:`uniform_int` draws from one distribution, vectorised.

    Rejections only skip engine outputs, so the accepted draws are the engine's
    outputs that pass the acceptance test, in order; this tests a block at a time and
    consumes exactly what the scalar loop would have. Ranges wider than ``2**32 - 1``
    fall back to the scalar loop.
    """
    urange = b - a
    if not 0 <= urange <= _M64:
        raise ValueError(f"uniform_int needs a <= b within 64 bits (got [{a}, {b}])")
    out = np.empty(count, dtype=np.int64)
    if urange >= _URNG_RANGE:
        for i in range(count):
            out[i] = a + _uniform_offset(rng, urange, method)
        return out
    uerange = urange + 1
    filled = 0
    while filled < count:
        need = count - filled
        raws = rng.peek(need + need // 16 + 16)
        if method is UniformIntMethod.LEMIRE:
            product = raws * np.uint64(uerange)
            ok = (product & np.uint64(_M32)) >= np.uint64((0x1_0000_0000 - uerange) % uerange)
            values = product >> np.uint64(32)
        else:
            scaling = _URNG_RANGE // uerange
            ok = raws < np.uint64(uerange * scaling)
            values = raws // np.uint64(scaling)
        accepted = np.flatnonzero(ok)[:need]
        got = accepted.shape[0]
        out[filled : filled + got] = values[accepted].astype(np.int64) + a
        filled += got
        rng.skip(int(accepted[-1]) + 1 if got == need else raws.shape[0])
    return out


def shuffle(
    items: MutableSequence[T],
    rng: MT19937,
    lo: int = 0,
    hi: int | None = None,
    method: UniformIntMethod = DEFAULT_UNIFORM_METHOD,
) -> None:
    """``std::shuffle(first + lo, first + hi, rng)`` in place, as libstdc++ >= 10 does it.

    libstdc++ runs Fisher-Yates from the front (element ``i`` swaps with a position in
    ``[0, i]``). When ``2**32 - 1 >= n * n`` for ``n = hi - lo`` (n <= 65535) it saves
    engine calls by drawing two swap positions from one ``uniform_int`` over
    ``[0, r * (r + 1))`` (``__gen_two_uniform_ints``), after a single first swap with
    ``[0, 1]`` when ``n`` is even; longer ranges draw one position per element. Both
    the positions and the number of engine outputs consumed match libstdc++.
    """
    if hi is None:
        hi = len(items)
    n = hi - lo
    if lo < 0 or hi > len(items) or n < 0:
        raise ValueError(f"shuffle range [{lo}, {hi}) is outside a sequence of {len(items)}")
    if n == 0:
        return
    uniform = _uniform_offset
    if _URNG_RANGE // n >= n:
        i = 1
        if n % 2 == 0:
            j = uniform(rng, 1, method)
            items[lo + 1], items[lo + j] = items[lo + j], items[lo + 1]
            i = 2
        while i < n:
            r = i + 1
            x = uniform(rng, r * (r + 1) - 1, method)
            j, k = divmod(x, r + 1)
            items[lo + i], items[lo + j] = items[lo + j], items[lo + i]
            items[lo + i + 1], items[lo + k] = items[lo + k], items[lo + i + 1]
            i += 2
        return
    for i in range(1, n):
        j = uniform(rng, i, method)
        items[lo + i], items[lo + j] = items[lo + j], items[lo + i]


def generate_canonical(rng: MT19937) -> float:
    """``std::generate_canonical<double, 53>(rng)``: a double in ``[0, 1)``.

    libstdc++ sums ``ceil(53 / 32) = 2`` draws as ``u1 + u2 * 2**32`` in double
    arithmetic (rounding to 53 bits), divides by ``2**64`` and, since the rounding can
    reach 1.0, clamps to the largest double below 1.
    """
    u1 = rng.next_u32()
    u2 = rng.next_u32()
    ret = (float(u1) + float(u2) * _TWO32) / _TWO64
    return _BELOW_ONE if ret >= 1.0 else ret


def exponential_ns(rng: MT19937, qps: float) -> int:
    """One Server inter-arrival time in integer nanoseconds, as LoadGen draws it.

    ``duration_cast<nanoseconds>(duration<double>(exponential_distribution<>(qps)(rng)))``:
    ``-log(1 - canonical) / qps`` seconds, times 1e9 in double, truncated toward zero.
    ``math.log`` is glibc's ``log``, the function LoadGen calls (numpy's vectorised log
    may differ in the last bit, which can move a nanosecond boundary).
    """
    seconds = -math.log(1.0 - generate_canonical(rng)) / qps
    return int(seconds * 1e9)


def exponential_ns_array(rng: MT19937, qps: float, count: int) -> npt.NDArray[np.int64]:
    """``count`` successive :func:`exponential_ns` draws (two engine outputs each)."""
    raws = rng.take(2 * count)
    canonical = (raws[0::2].astype(np.float64) + raws[1::2].astype(np.float64) * _TWO32) / _TWO64
    canonical = np.minimum(canonical, _BELOW_ONE)
    logs = np.fromiter(map(math.log, (1.0 - canonical).tolist()), dtype=np.float64, count=count)
    seconds = -logs / qps
    return (seconds * 1e9).astype(np.int64)


# ------------------------------------------------------------------ loadable sets


def loadable_sets(
    total_count: int,
    performance_sample_count: int,
    qsl_seed: int,
    padding: int = 0,
    method: UniformIntMethod = DEFAULT_UNIFORM_METHOD,
) -> list[list[int]]:
    """LoadGen's ``GenerateLoadableSets``: the sample indices loaded together, per set.

    Shuffles ``0 .. total_count - 1`` with ``mt19937(qsl_seed)`` and cuts the result
    into sets of ``performance_sample_count`` (the last one may be shorter). Each set
    then gets ``padding`` extra entries copying its own first ones (MultiStream passes
    ``samples_per_query - 1`` so a query's contiguous samples never run off the end).

    ``total_count`` is what LoadGen passes, capped at the dataset size: the performance
    sample count in performance mode (whose first set is the performance set, hence a
    permutation of ``0 .. performance_sample_count - 1``) and the accuracy sample count
    in accuracy mode (every set is issued in turn). See :func:`loadable_sets_for`.
    """
    if total_count < 0 or performance_sample_count <= 0 or padding < 0:
        raise ConfigError(
            f"cannot cut {total_count} samples into loadable sets of "
            f"{performance_sample_count} (padding {padding})"
        )
    samples = list(range(total_count))
    shuffle(samples, MT19937(qsl_seed), method=method)
    sets = [
        samples[i : i + performance_sample_count]
        for i in range(0, total_count, performance_sample_count)
    ]
    for s in sets:
        for i in range(padding):
            s.append(s[i])
    return sets


def loadable_sets_for(
    eff: EffectiveSettings,
    *,
    accuracy_sample_count: int | None = None,
    method: UniformIntMethod = DEFAULT_UNIFORM_METHOD,
) -> list[tuple[list[int], int]]:
    """The ``(loaded_set, sample_distribution_end)`` pairs LoadGen issues for ``eff``.

    One pair (the performance set) in performance mode; every set of the accuracy
    sample count (``accuracy_sample_count``, default ``eff.total_sample_count``) in
    accuracy mode, each to be passed to :func:`generate_queries` in turn.
    ``sample_distribution_end`` is the set's size before MultiStream padding.
    """
    loadgen = eff.scenario.loadgen
    padding = eff.samples_per_query - 1 if loadgen is Scenario.MULTI_STREAM else 0
    if eff.mode is Mode.ACCURACY:
        count = eff.total_sample_count if accuracy_sample_count is None else accuracy_sample_count
    else:
        count = eff.performance_sample_count
    count = min(count, eff.total_sample_count)
    sets = loadable_sets(count, eff.performance_sample_count, eff.seeds.qsl, padding, method)
    pairs = [(s, len(s) - padding) for s in sets]
    return pairs if eff.mode is Mode.ACCURACY else pairs[:1]


# ------------------------------------------------------------------------ queries


@dataclass(frozen=True, slots=True, eq=False)
class GeneratedQueries:
    """The queries LoadGen's ``GenerateQueries`` builds, before anything is issued.

    Query ``q`` holds ``query_sizes[q]`` samples, which are the next entries of
    ``sample_index`` (dataset indices, in issue order). ``scheduled_ns[q]`` is the
    generated offset from the start of the run: what Server sleeps until, and for the
    other scenarios the nominal ``q / expected_qps`` that issuing ignores. All sizes
    equal ``samples_per_query`` except the Offline accuracy "remainder" query, the
    last one, when the loaded set is not a multiple of it.
    """

    samples_per_query: int
    """LoadGen's ``generated_samples_per_query`` (after Offline equal-issue padding)."""
    scheduled_ns: npt.NDArray[np.int64]
    query_sizes: npt.NDArray[np.int64]
    sample_index: npt.NDArray[np.int64]
    loaded_set: list[int]
    generated_query_duration_ns: int
    """LoadGen's ``generated_query_duration``: the schedule's end, one inter-arrival
    time after the last full query (a remainder query is scheduled there)."""

    @property
    def generated_query_count(self) -> int:
        """LoadGen's ``generated_query_count``."""
        return int(self.query_sizes.shape[0])

    @property
    def query_offsets(self) -> npt.NDArray[np.int64]:
        """``sample_index[query_offsets[q]:query_offsets[q + 1]]`` is query ``q``."""
        offsets = np.zeros(self.query_sizes.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.query_sizes, out=offsets[1:])
        return offsets


class _Schedule:
    """The generated timestamps, drawn lazily: ``t[0] = 0``, ``t[k + 1] = t[k] + d_k``."""

    def __init__(self, scenario: Scenario, qps: float, seed: int) -> None:
        self._server = scenario is Scenario.SERVER
        self._qps = qps
        self._rng = MT19937(seed)
        if not self._server:
            # duration_cast<nanoseconds>(duration<double>(1.0 / qps))
            self._period = int(1.0 / qps * 1e9)
        self._t: npt.NDArray[np.int64] = np.zeros(1, dtype=np.int64)

    def _grow(self, n: int) -> None:
        """Make ``t[0 .. n]`` known (``n`` draws)."""
        have = self._t.shape[0] - 1
        if n <= have:
            return
        if self._server:
            draws = exponential_ns_array(self._rng, self._qps, n - have)
        else:
            draws = np.full(n - have, self._period, dtype=np.int64)
        self._t = np.concatenate((self._t, int(self._t[-1]) + np.cumsum(draws)))

    def first_at_or_after(self, gen_ns: int) -> int:
        """The smallest ``i`` with ``t[i] >= gen_ns``."""
        if not self._server:
            if self._period <= 0:
                raise ConfigError(
                    f"a rate of {self._qps} queries/s rounds to a zero period; LoadGen "
                    "would generate queries forever (lower the expected rate)"
                )
            return -(-gen_ns // self._period)
        while True:
            i = int(np.searchsorted(self._t, gen_ns, side="left"))
            if i < self._t.shape[0]:
                return i
            have = self._t.shape[0] - 1
            mean_ns = 1e9 / self._qps
            self._grow(have + max(1024, int(1.1 * (gen_ns - int(self._t[-1])) / mean_ns)))

    def times(self, n: int) -> npt.NDArray[np.int64]:
        """``t[0 .. n]`` (``n + 1`` values)."""
        self._grow(n)
        return self._t[: n + 1]


def _query_count(schedule: _Schedule, gen_ns: int, min_queries: int, bump: int) -> int:
    """How many queries LoadGen's generation loop emits.

    The loop runs ``while prev_timestamp < gen_duration || queries < min_queries``,
    where ``prev_timestamp`` is the last query's time; in equal-issue mode (``bump`` =
    the loaded-set size, else 0) each time the count reaches ``min_queries`` while the
    schedule is still short of ``gen_duration``, ``min_queries`` grows by one set. The
    times never decrease, so this jumps from one such event to the next.
    """
    if gen_ns <= 0:
        return min_queries
    k0 = schedule.first_at_or_after(gen_ns) + 1  # first count whose last time >= gen
    m = min_queries
    if bump:
        q = 0
        while True:
            nq = max(q + 1, m)  # next count at which the bump test passes
            if nq > k0 - 1:
                break
            m += bump
            q = nq
    return max(k0, m)


def generate_queries(
    eff: EffectiveSettings,
    loaded_set: list[int],
    sample_distribution_end: int,
    *,
    performance_issue_unique: bool = False,
    performance_issue_same: bool = False,
    performance_issue_same_index: int = 0,
    method: UniformIntMethod = DEFAULT_UNIFORM_METHOD,
) -> GeneratedQueries:
    """LoadGen's ``GenerateQueries<scenario, mode>`` for one loaded set.

    ``loaded_set`` is a set from :func:`loadable_sets` (with MultiStream padding) and
    ``sample_distribution_end`` its size without padding. Reproduces, in order:

    * the random draws' order on ``mt19937(sample_index seed)``: the mode's sample
      distribution (accuracy mode shuffles the candidate starts), then the "unique"
      distribution (always shuffled, even when unused), then the equal-issue
      distribution (``ceil(min_queries / set size)`` chained shuffles of the set's
      positions, from the *unpadded* ``min_queries``, read cyclically);
    * equal-issue padding (performance mode with ``sample_concatenate_permutation``) of
      ``min_queries`` up to a multiple of the set size, or of Offline's samples per
      query, and the extra set added each time the count is reached while the
      schedule is still shorter than the generation duration (2x the target duration,
      1x for Server);
    * samples: uniform with replacement (performance), a shuffled pass over the set
      (accuracy), MultiStream's contiguous runs, Offline's repeats of the set (each
      repeat shuffled in equal-issue mode), and the Offline accuracy remainder query;
    * times: exponential inter-arrivals on ``mt19937(schedule seed)`` for Server, a
      fixed ``1 / qps`` period otherwise.

    ``performance_issue_*`` are LoadGen's settings of those names (compliance tests).
    Settings that make LoadGen crash (an empty equal-issue cycle, running out of
    unique samples) raise :class:`~tokenmark.errors.ConfigError` instead.
    """
    scenario = eff.scenario.loadgen
    if scenario not in (
        Scenario.SERVER,
        Scenario.OFFLINE,
        Scenario.SINGLE_STREAM,
        Scenario.MULTI_STREAM,
    ):
        raise ConfigError(
            f"{eff.scenario.value} is not an MLPerf scenario; LoadGen query generation "
            "applies to Offline, Server, Interactive, SingleStream and MultiStream"
        )
    accuracy = eff.mode is Mode.ACCURACY
    loaded = list(loaded_set)
    set_size = len(loaded)
    end = sample_distribution_end
    if set_size == 0 or not 0 < end <= set_size:
        raise ConfigError(
            f"a loaded set of {set_size} samples cannot end its distribution at {end}"
        )
    if performance_issue_same and not 0 <= performance_issue_same_index < set_size:
        raise ConfigError(
            f"performance_issue_same_index {performance_issue_same_index} is outside the "
            f"loaded set of {set_size} samples"
        )
    multi = scenario is Scenario.MULTI_STREAM
    offline = scenario is Scenario.OFFLINE

    gen_ns = eff.target_duration_ns * (1 if scenario is Scenario.SERVER else 2)
    min_queries = eff.min_query_count
    spq = eff.samples_per_query
    if offline and performance_issue_unique:
        spq = eff.performance_sample_count  # TestSettingsInternal does this
    if accuracy and offline:
        spq = end
    if accuracy or performance_issue_unique:
        gen_ns = 0
        min_queries = set_size // spq

    sample_rng = MT19937(eff.seeds.sample_index)
    stride = spq if multi else 1

    # Construction order matters: each distribution consumes sample_rng.
    accuracy_starts: list[int] = []
    if accuracy:
        accuracy_starts = list(range(0, end, stride))
        shuffle(accuracy_starts, sample_rng, method=method)
    unique_starts = list(range(0, end, stride))
    shuffle(unique_starts, sample_rng, method=method)
    equal_issue_cycle: list[int] = []
    positions = list(range(set_size))
    for _ in range(0, min_queries, set_size):
        shuffle(positions, sample_rng, method=method)
        equal_issue_cycle.extend(positions)

    equal_issue = eff.sample_concatenate_permutation
    if not accuracy and equal_issue:
        if offline and spq % set_size:
            spq += set_size - spq % set_size
        elif not offline and min_queries % set_size:
            min_queries += set_size - min_queries % set_size

    schedule = _Schedule(scenario, eff.target_qps, eff.seeds.schedule)
    bump = set_size if equal_issue and not offline else 0
    n = _query_count(schedule, gen_ns, min_queries, bump)
    times = schedule.times(n)
    loaded_arr = np.asarray(loaded, dtype=np.int64)

    def draws(count: int) -> npt.NDArray[np.int64]:
        """The next ``count`` positions from the mode's own sample distribution."""
        if accuracy:
            return _take_prefix(accuracy_starts, count, "accuracy")
        return uniform_int_array(sample_rng, 0, end - 1, count, method)

    sizes = [spq] * n
    if multi:
        if performance_issue_unique:
            starts = _take_prefix(unique_starts, n, "unique")
        elif performance_issue_same:
            starts = np.full(n, performance_issue_same_index, dtype=np.int64)
        else:
            starts = draws(n)
        if n and int(starts.max()) + spq > set_size:
            raise ConfigError("MultiStream samples run past the loaded set's padding")
        picks = (starts[:, None] + np.arange(spq, dtype=np.int64)).reshape(-1)
        samples = loaded_arr[picks]
    elif offline:
        samples = _offline_samples(
            loaded,
            n,
            spq,
            sample_rng,
            equal_issue,
            performance_issue_same,
            performance_issue_same_index,
            method,
        )
    else:
        total = n * spq
        if performance_issue_unique:
            pos = _take_prefix(unique_starts, total, "unique")
        elif performance_issue_same:
            pos = np.full(total, performance_issue_same_index, dtype=np.int64)
        elif equal_issue:
            if total and not equal_issue_cycle:
                raise ConfigError(
                    "equal-issue mode (sample_concatenate_permutation) needs "
                    "min_query_count >= 1; LoadGen divides by zero otherwise"
                )
            cycle = np.asarray(equal_issue_cycle, dtype=np.int64)
            pos = cycle[np.arange(total, dtype=np.int64) % max(cycle.shape[0], 1)]
        else:
            pos = draws(total)
        samples = loaded_arr[pos]

    scheduled = times[:n].copy()
    duration = int(times[n])
    if offline and accuracy:
        remaining = set_size % spq
        if remaining:
            rest = loaded_arr[draws(remaining)]
            samples = np.concatenate((samples, rest))
            sizes.append(remaining)
            scheduled = np.append(scheduled, duration)
    return GeneratedQueries(
        samples_per_query=spq,
        scheduled_ns=_frozen(scheduled),
        query_sizes=_frozen(np.asarray(sizes, dtype=np.int64)),
        sample_index=_frozen(np.asarray(samples, dtype=np.int64)),
        loaded_set=loaded,
        generated_query_duration_ns=duration,
    )


def _frozen(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.array(values, dtype=np.int64)  # a private copy, then read-only
    out.flags.writeable = False
    return out


def _take_prefix(values: list[int], count: int, what: str) -> npt.NDArray[np.int64]:
    if count > len(values):
        raise ConfigError(
            f"the {what} sample distribution has {len(values)} entries but {count} are "
            "needed; LoadGen would stop with std::out_of_range (check "
            "performance_issue_unique against equal-issue padding)"
        )
    return np.asarray(values[:count], dtype=np.int64)


def _offline_samples(
    loaded: list[int],
    n: int,
    spq: int,
    rng: MT19937,
    equal_issue: bool,
    same: bool,
    same_index: int,
    method: UniformIntMethod,
) -> npt.NDArray[np.int64]:
    """Offline's queries: the loaded set repeated, each repeat shuffled in equal issue."""
    set_size = len(loaded)
    repeats, remainder = divmod(spq, set_size)
    out: list[int] = []
    for _ in range(n):
        if same:
            out.extend([loaded[same_index]] * spq)
            continue
        for _ in range(repeats):
            block = list(loaded)
            if equal_issue:
                shuffle(block, rng, method=method)
            out.extend(block)
        out.extend(loaded[:remainder])
    return np.asarray(out, dtype=np.int64)
