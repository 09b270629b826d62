"""A Ray body's collector schedule: young cycles are reclaimed, survivors leave the walk."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from actors.runtime.heap import HeapSettler


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_settle_reclaims_young_cycles_and_freezes_what_survives() -> None:
    try:
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
        del first, second
        kept = [_Node() for _ in range(100)]
        settler = HeapSettler()
        assert settler.settle() >= 2
        assert gone() is None  # the cycle was younger than one interval: reclaimed
        assert gc.get_freeze_count() >= len(kept)  # the survivors are out of every later walk
        assert settler.status()["settles"] == 1
    finally:
        gc.unfreeze()


def test_a_started_settler_runs_on_its_interval_and_is_the_only_collector() -> None:
    async def run() -> tuple[int, bool]:
        settler = HeapSettler(interval_s=0.01)
        settler.start()
        await asyncio.sleep(0.1)
        return settler.settles, gc.isenabled()

    try:
        settles, collector_on = asyncio.run(run())
        assert settles >= 3 and not collector_on
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_paused_block_keeps_the_collector_off_only_inside_and_settles_when_due() -> None:
    settler = HeapSettler(interval_s=3600)
    try:
        with settler.paused():
            assert not gc.isenabled()
        assert gc.isenabled() and settler.settles == 1  # the first is due at once
        with settler.paused():
            pass
        assert settler.settles == 1  # the next one in an hour
    finally:
        gc.unfreeze()


def test_a_cycle_that_dies_after_it_was_frozen_is_reclaimed_by_the_next_full_settle() -> None:
    try:
        settler = HeapSettler(full_every=3)
        settler.settle()  # the first settle is a full one
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
        settler.settle()  # young: the pair survives and is frozen
        del first, second
        settler.settle()  # young again: the frozen pair is not walked
        assert gone() is not None
        settler.settle()  # the third after a full one: full, the pair is reclaimed
        assert gone() is None
    finally:
        gc.unfreeze()


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s=0"):
        HeapSettler(interval_s=0)
    with pytest.raises(ValueError, match="full_every=0"):
        HeapSettler(full_every=0)


def test_an_in_process_cluster_settles_from_its_loop() -> None:
    from actors.runtime import build_cluster, wait_ready

    try:
        settler = HeapSettler(interval_s=0.001, full_every=2)
        host = build_cluster(3, shared_fold=True, heap=settler)
        assert wait_ready(host, 3)
        assert settler.settles >= 1
    finally:
        gc.unfreeze()
