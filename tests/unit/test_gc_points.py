"""GcPoints (issue 21): the automatic collector's work, done right after a send.

Ground truth: a reference cycle is only reclaimed by the cyclic collector, so a weak
reference to one tells whether a collection ran; thresholds are the interpreter's own.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from tokenmark.loadgen.runner import GC_MARGIN_NS, GcPoints


class Node:
    def __init__(self) -> None:
        self.me = self


def cycle() -> weakref.ref[Node]:
    return weakref.ref(Node())


@pytest.fixture
def points():
    KEEP.clear()
    assert gc.isenabled()
    p = GcPoints()
    p.start()
    yield p
    p.stop()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


KEEP: list[list[object]] = []


def pile(p: GcPoints, factor: int = 1) -> None:
    """Allocate containers (kept: freeing them lowers the count again) until a young
    collection is due at ``factor`` x the threshold."""
    junk: list[object] = []
    KEEP.append(junk)
    while gc.get_count()[0] <= p.thresholds[0] * factor:
        junk.append([])


def test_the_automatic_collector_is_off_and_old_objects_frozen(points):
    assert not gc.isenabled()
    assert gc.get_freeze_count() > 0  # what existed before the clock
    ref = cycle()
    pile(points, 3)  # past the threshold: the automatic collector would have run
    assert ref() is not None


def test_due_garbage_is_collected_after_a_send_with_room(points):
    ref = cycle()
    pile(points)
    points.after_send(GC_MARGIN_NS + 10**9)
    assert ref() is None


def test_nothing_is_collected_when_the_next_send_is_close(points):
    ref = cycle()
    pile(points)
    points.after_send(GC_MARGIN_NS - 1)
    assert ref() is not None
    points.after_send(GC_MARGIN_NS + 10**9)  # the next gap that has room
    assert ref() is None


def test_nothing_is_collected_before_the_threshold(points):
    gc.collect(0)  # count 0
    ref = cycle()
    points.after_send(10**12)
    assert ref() is not None


def test_overdue_collects_only_past_ten_thresholds(points):
    ref = cycle()
    pile(points)
    points.overdue()
    assert ref() is not None
    pile(points, 10)
    points.overdue()
    assert ref() is None


def test_generations_follow_the_interpreter_thresholds(points):
    t0, t1, t2 = points.thresholds
    gc.collect()  # all counts 0
    assert points.due() == -1
    pile(points)
    assert points.due() == 0
    for _ in range(t1):
        gc.collect(0)
    pile(points)
    assert points.due() == 1
    for _ in range(t2):
        gc.collect(1)
    for _ in range(t1):
        gc.collect(0)
    pile(points)
    assert points.due() == 2


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    try:
        p = GcPoints()
        p.start()
        assert not p.active and gc.get_freeze_count() == 0
        p.stop()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.fixture
def generations():
    """The generation of every collection while the test runs (the interpreter's own
    report, ``gc.callbacks``)."""
    seen: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(on_gc)
    yield seen
    gc.callbacks.remove(on_gc)


def middle_due(p: GcPoints, factor: int) -> None:
    """A middle (generation 1) collection due, with ``factor`` x the young threshold."""
    gc.collect()
    for _ in range(p.thresholds[1]):
        gc.collect(0)
    pile(p, factor)
    assert p.due(factor) == 1


def test_overdue_with_a_send_close_collects_only_the_young_generation(points, generations):
    middle_due(points, 10)
    generations.clear()
    points.overdue(GC_MARGIN_NS - 1)  # no room for anything: the young one regardless
    assert generations == [0]
    middle_due(points, 10)
    generations.clear()
    points.overdue()  # no send waiting: what is due
    assert generations == [1]


def test_after_send_steps_down_to_a_generation_that_fits(points, generations):
    middle_due(points, 1)
    points.collect(0)  # the young one's cost is timed: a small, real figure
    middle_due(points, 1)
    generations.clear()
    points._cost[1] = 10**9  # a middle collection that would take a second
    points.after_send(GC_MARGIN_NS + 2 * points._cost[0] + 10**6)
    assert generations == [0]
