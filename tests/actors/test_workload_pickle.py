"""A workload travels to every actor of a deployment pickled: it must arrive equal, and be
worked out once however many actors it is sent to."""

from __future__ import annotations

import pickle
from random import Random

from actors.workload import TopicSpec, Workload


def _sample() -> Workload:
    workload = Workload.zipf(Random(7), ["public/a", "public/b"], topics_per_namespace=500)
    workload.multipliers.update({"public/b": 2.5, "persistent://public/a/topic-00003": 4.0})
    return workload


def test_a_pickled_workload_is_the_same_workload_spikes_included() -> None:
    workload = _sample()
    again = pickle.loads(pickle.dumps(workload))
    assert again.topics() == workload.topics() and again.multipliers == workload.multipliers
    for bundle in ("public/a/0x00000000_0x40000000", "public/b/0x40000000_0xffffffff"):
        assert again.topics_in(bundle) == workload.topics_in(bundle)
        assert again.bundle_stats(bundle) == workload.bundle_stats(bundle)
        assert again.topic_loads(bundle) == workload.topic_loads(bundle)


def test_a_spike_set_after_the_first_pickle_travels_too() -> None:
    workload = _sample()
    pickle.dumps(workload)
    workload.multipliers["public/a"] = 9.0
    assert pickle.loads(pickle.dumps(workload)).multipliers["public/a"] == 9.0


def test_odd_names_survive() -> None:
    odd = [TopicSpec("persistent://t/n/a\0b", 1.0, 2.0, 3.0, 4.0, 2, 3),
           TopicSpec("persistent://t/n/é-ü", 5.0, 6.0, 7.0, 8.0, 1, 0)]
    again = pickle.loads(pickle.dumps(Workload(odd)))
    assert sorted(t.name for t in again.topics()) == sorted(t.name for t in odd)
    assert set(again.topics()) == set(odd)
