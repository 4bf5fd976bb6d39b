"""The collector settings of a run: raised for the run, as they were after it."""

from __future__ import annotations

import gc

import pytest

from kafka_chaos.harness.collector import YOUNG_THRESHOLD, fewer_collections


def test_a_run_collects_young_objects_less_often_and_leaves_what_existed_before_it_out() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with fewer_collections():
        assert gc.get_threshold() == (max(YOUNG_THRESHOLD, before[0]), *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_an_inner_block_keeps_the_outer_blocks_settings_until_the_outer_one_ends() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        outer = gc.get_threshold()
        with fewer_collections(young_threshold=10):
            assert gc.get_threshold() == outer  # never below the outer block's threshold
        assert gc.get_threshold() == outer
        assert gc.get_freeze_count() > 0  # the inner block did not unfreeze the outer one's objects
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_settings_are_restored_when_the_run_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
