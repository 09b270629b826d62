"""Pins the stored names: every event and command type, its version and its field names.

Logs keep these names forever. A rename, a removed field or a new required field without a
version bump and an upcaster makes old logs unreadable, so this test fails on any of them; change
it only together with a version bump and an upcaster in ``events/codec.py``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from balancer.bundles import namespace_of
from events.catalog import (
    COMMANDS,
    EVENTS,
    LOAD_TOPIC,
    BundleAssigned,
    CommandRejected,
    LeaderElected,
    LoadReported,
    SplitBundle,
    UnloadRequested,
    from_payload,
)

PINNED: dict[str, tuple[int, tuple[str, ...]]] = {
    "LeaderElected": (1, ("epoch", "leader_id")),
    "BrokerRegistered": (1, ("broker_id", "capacity", "failure_domain", "url", "version")),
    "BrokerLeft": (2, ("broker_id", "reason")),
    "LoadReported": (1, ("broker_id", "broker_load", "bundles")),
    "NamespaceCreated": (2, ("anti_affinity_group", "boundaries", "by", "isolation", "namespace")),
    "NamespacePolicySet": (2, ("anti_affinity_group", "by", "isolation", "namespace")),
    "FailureDomainSet": (2, ("brokers", "by", "domain")),
    "BundleAssigned": (2, ("bundle", "decision", "dst", "force", "reason", "src")),
    "BundleOwned": (1, ("bundle", "owner", "src")),
    "UnloadRequested": (1, ("bundle", "decision", "reason", "src")),
    "TransferPrepared": (1, ("bundle", "decision", "dst", "reason", "src")),
    "BundleReleased": (1, ("bundle", "src")),
    "SplitRequested": (3, ("algorithm", "bundle", "by", "positions", "proposal", "reason", "src",
                           "unload_children")),
    "SplitCompleted": (2, ("boundaries", "by", "children", "owner", "parent")),
    "SheddingSkipped": (2, ("folded", "reason", "strategy")),
    "CommandRejected": (1, ("command", "command_id", "error", "key")),
    "SourceMessageRejected": (1, ("error", "key", "message_id", "source", "value")),
    "ShedderUnloadsCounted": (1, ("since_ms", "strategy", "unloaded")),
    "ProposalRecorded": (1, ("brokers", "folded", "mode", "moves", "predicted", "proposal_id",
                             "run_ms", "skip", "strategy")),
    "ExecutionRequested": (1, ("algorithm", "boundaries", "bundle", "decision", "dst",
                               "execution_id", "from_version", "kind", "proposal_id", "request",
                               "src")),
    "ExecutionAccepted": (1, ("bundle", "execution_id", "message", "status")),
    "ExecutionUnanswered": (1, ("bundle", "error", "execution_id")),
    "ExecutionRefused": (1, ("bundle", "execution_id", "message", "status")),
    "ExecutionConfirmed": (1, ("bundle", "children", "evidence", "execution_id", "owner",
                               "waited_ms")),
    "ExecutionFailed": (1, ("bundle", "detail", "execution_id", "reason", "state", "waited_ms")),
    "BalancerPaused": (1, ("by", "reason", "since_ms", "until_ms")),
    "BalancerResumed": (1, ("at_ms", "by", "since_ms")),
    "LeaderHeartbeat": (1, ("leader_id",)),
    "BrokerDrainRequested": (1, ("broker", "bundles", "by", "rate_per_minute", "since_ms")),
    "BrokerUndrained": (1, ("at_ms", "broker", "by", "cancelled", "left", "since_ms")),
    "ProposalApproved": (1, ("at_ms", "by", "proposal_id")),
    "ProposalRejected": (1, ("at_ms", "by", "note", "proposal_id")),
    "ProposalCancelled": (1, ("at_ms", "bundles", "by", "proposal_id")),
    "ProposalStale": (1, ("at_ms", "proposal_id", "reason")),
    "CreateNamespace": (2, ("anti_affinity_group", "boundaries", "bundles", "by", "command_id", "epoch",
                            "isolation", "namespace")),
    "SetNamespacePolicy": (2, ("anti_affinity_group", "by", "command_id", "epoch", "isolation", "namespace")),
    "SetFailureDomain": (2, ("brokers", "by", "command_id", "domain", "epoch")),
    "AssignBundle": (2, ("bundle", "command_id", "decision", "dst", "epoch", "force", "reason")),
    "ConfirmOwnership": (1, ("bundle", "command_id", "epoch", "owner", "src")),
    "UnloadBundle": (1, ("bundle", "command_id", "decision", "dst", "epoch", "reason")),
    "UnloadNamespace": (2, ("by", "command_id", "epoch", "namespace")),
    "SplitBundle": (3, ("algorithm", "bundle", "by", "command_id", "epoch", "namespace", "positions",
                        "proposal", "unload")),
    "ConfirmRelease": (1, ("bundle", "command_id", "epoch", "src")),
    "ConfirmSplit": (1, ("boundaries", "children", "command_id", "epoch", "owner", "parent")),
    "PauseBalancer": (1, ("by", "command_id", "duration_ms", "epoch", "reason")),
    "ResumeBalancer": (1, ("by", "command_id", "epoch")),
    "DrainBroker": (1, ("broker", "by", "command_id", "epoch", "rate_per_minute")),
    "UndrainBroker": (1, ("broker", "by", "command_id", "epoch")),
    "ReviewProposal": (1, ("by", "command_id", "epoch", "note", "proposal_id", "verdict")),
}


def test_every_type_name_version_and_field_is_pinned() -> None:
    actual = {
        cls.TYPE: (cls.VERSION, tuple(sorted(f.name for f in fields(cls))))
        for cls in (*EVENTS, *COMMANDS)
    }
    assert actual == PINNED


def test_the_contract_lists_are_complete() -> None:
    # contracts §1 (17 events; the mirror's SourceMessageRejected and ShedderUnloadsCounted; 7 of
    # proposals and their executions; the operator's pause and resume; a broker's drain and
    # undrain; the verdicts on the leader's proposals) and §2 (10 commands, and pause, resume,
    # drain, undrain and the verdict on a proposal)
    assert len(EVENTS) == 34
    assert len(COMMANDS) == 15
    assert all(cls.__name__ == cls.TYPE for cls in (*EVENTS, *COMMANDS))


def test_events_are_immutable() -> None:
    event = LeaderElected(leader_id="broker-1", epoch=3)
    with pytest.raises(FrozenInstanceError):
        event.epoch = 4  # type: ignore[misc]


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        LeaderElected("broker-1", 3)  # type: ignore[call-arg]


def test_every_command_carries_an_id_and_an_epoch() -> None:
    for cls in COMMANDS:
        names = {f.name for f in fields(cls)}
        assert {"command_id", "epoch"} <= names, cls.TYPE


def test_keys_follow_the_architecture() -> None:
    bundle = "public/default/0x00000000_0x40000000"
    assert BundleAssigned(bundle=bundle, dst="b").default_key() == "public/default"
    assert LeaderElected(leader_id="b", epoch=1).default_key() == "_leader"
    assert LoadReported(broker_id="broker-2", broker_load={}).default_key() == "broker-2"
    assert LoadReported.TOPIC == LOAD_TOPIC
    assert SplitBundle(command_id="c", epoch=1, namespace="t/n", bundle="LARGEST",
                       algorithm="range_equally_divide").default_key() == "t/n"
    assert CommandRejected(command_id="c", command="SplitBundle", error={}, key="t/n").default_key() == "t/n"
    assert namespace_of(bundle) == "public/default"


def test_a_decision_travels_as_a_plain_dict() -> None:
    decision = {"label": "Success", "reason": "Overloaded", "inputs": {"cpu": 0.91}}
    event = UnloadRequested(bundle="t/n/0x00000000_0xffffffff", src="b1", reason="Overloaded",
                            decision=decision)
    assert from_payload("UnloadRequested", event.to_payload()) == event
