"""Drains on the in-process host: a broker emptied before a planned restart, and back.

What an operator would notice: a drained broker receives nothing (no lookup, no transfer, no
orphan) while its bundles move away at the rate asked, to brokers the placement rules allow;
its shutdown then leaves nothing to reassign; a restarted leader goes on with the drain; an
undrain stops the moves not started; bad input is one line, exit 2, nothing recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from actors.runtime import InProcessHost
from actors.settings import LEADER
from balancer.config import LoadBalancerConfig
from balancer.drain import Progress, allowance, check_drain, next_bundles, parse_rate
from balancer.errors import InvalidInput, MalformedInput, UnknownBroker
from events.catalog import (
    BrokerDrainRequested,
    BrokerLeft,
    BrokerUndrained,
    BundleAssigned,
    CreateNamespace,
    DrainBroker,
    LookupBundle,
    TransferPrepared,
    UndrainBroker,
    UnloadBundle,
)
from lbctl.attach import using
from lbctl.main import main
from projections.drain import SEEN_LEADER_SEQ, DrainHistory, drain_history
from tests.support.cluster_scenarios import (
    all_owned,
    assert_consistent,
    bundles,
    call,
    make_host,
    place_all,
)

MINUTE = 60_000


def host_of(brokers: int = 3, **keys: object) -> InProcessHost:
    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False, **keys})
    host = make_host(config, brokers=brokers, bundles=8)
    place_all(host)
    return host


def held(host: InProcessHost, broker: str) -> list[str]:
    return [r.bundle for r in host.view.bundles() if r.owner == broker]


def lbctl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the pure rules ------------------------------------------------------------------------------


def test_the_rate_paces_moves_and_no_burst_follows_a_gap() -> None:
    assert allowance(60, 0, 0, 0) == 1  # one at once
    assert allowance(60, 0, 999, 1) == 0
    assert allowance(60, 0, 1_000, 1) == 1
    assert allowance(60, 0, 10 * MINUTE, 2) == 1  # a leader away for minutes: one second's worth
    assert allowance(600, 0, 10 * MINUTE, 2) == 10


@pytest.mark.parametrize(("text", "per_minute"), [("120/min", 120), ("2/s", 120), ("600/h", 10), ("30", 30)])
def test_rates_are_read_per_minute(text: str, per_minute: float) -> None:
    assert parse_rate(text) == per_minute


@pytest.mark.parametrize("text", ["0", "-5", "nan", "inf", "-inf", "0/min", "fast", "5/fortnight", "1e999"])
def test_a_rate_that_is_not_positive_and_finite_is_named(text: str) -> None:
    with pytest.raises(MalformedInput, match=f"--rate '{text}'"):
        parse_rate(text)


def test_a_drain_keeps_a_home_for_the_bundles() -> None:
    with pytest.raises(UnknownBroker, match="'b9'"):
        check_drain("b9", ["b1", "b2"], [])
    with pytest.raises(InvalidInput, match="'b2' is the last broker not drained"):
        check_drain("b2", ["b1", "b2"], ["b1"])
    check_drain("b2", ["b1", "b2", "b3"], ["b1"])
    assert next_bundles(["t/n/c", "t/n/a", "t/n/b"], {"t/n/a"}, 1) == ["t/n/b"]
    assert Progress(40, 28, 120).bar(10) == "[###.......] 12 of 40 moved, 28 left, 120/min, ETA 14 s"


def test_a_reception_breaks_a_drain_only_if_its_writer_had_folded_the_drain() -> None:
    def transfer(bundle: str, started_ms: int, seen: int | None) -> TransferPrepared:
        stamp = {} if seen is None else {SEEN_LEADER_SEQ: seen}
        return TransferPrepared(bundle=bundle, src="b1", dst="b2", reason="admin",
                                decision={"started_ms": started_ms, **stamp})

    history = DrainHistory()
    history.take(BrokerDrainRequested(broker="b2", since_ms=1_000, rate_per_minute=60, by="ops", bundles=3),
                 1_000, seq=7)
    history.take(transfer("t/n/0x00_0x10", 1_020, seen=6), 1_020)  # decided before its shard folded seq 7
    history.take(transfer("t/n/0x10_0x20", 990, seen=7), 1_030)  # knew of it: the clocks do not excuse it
    history.take(BundleAssigned(bundle="t/n/0x20_0x30", dst="b2", reason="lookup"), 1_040)  # no stamp: by time
    history.take(BrokerUndrained(broker="b2", since_ms=1_000, at_ms=2_000, by="ops", cancelled=0, left=0),
                 2_000, seq=9)
    history.take(transfer("t/n/0x30_0x40", 1_990, seen=9), 2_010)  # its shard had folded the undrain
    assert history.violations() == [
        "990: b2 received t/n/0x10_0x20 by transfer while drained (since 1000)",
        "1040: b2 received t/n/0x20_0x30 by assignment (lookup) while drained (since 1000)"]
    assert history.raced() == ["1020: b2 received t/n/0x00_0x10 by transfer while drained (since 1000); "
                               "its writer had folded _leader to seq 6 only"]


# -- the leader ----------------------------------------------------------------------------------


def test_a_drained_broker_empties_at_its_rate_and_receives_nothing() -> None:
    host = host_of()
    before = held(host, "broker-2")
    assert len(before) >= 3
    drained = call(host, DrainBroker, broker="broker-2", rate_per_minute=6, by="ops").first("BrokerDrainRequested")
    assert drained is not None and drained["bundles"] == len(before) and drained["by"] == "ops"
    host.advance(15_000)  # 6/min: one at once, one more after 10 s
    assert len(held(host, "broker-2")) == len(before) - 2
    # A new namespace's bundles go elsewhere while it drains.
    call(host, CreateNamespace, namespace="public/new", bundles=4)
    for bundle in bundles(host, "public/new"):
        call(host, LookupBundle, bundle=bundle)
    host.advance(len(before) * 10_000 + 5_000)
    assert all_owned(host) and held(host, "broker-2") == []
    assert drain_history(host.records).violations() == []
    moves = [r.envelope.payload for r in host.events("TransferPrepared") if r.envelope.payload["src"] == "broker-2"]
    assert len(moves) == len(before) and all(m["reason"] == "drain" for m in moves)
    assert all(m["decision"]["strategy"] == "Drain" and m["decision"]["placement"] for m in moves)
    status = host.bodies[LEADER].status()["control"]["drains"]
    assert [(d["broker"], d["left"], d["done"]) for d in status] == [("broker-2", 0, len(before))]
    # Its shutdown leaves nothing to reassign: no orphan placement follows its leaving.
    count = len(host.records)
    host.shutdown_broker("broker-2")
    assert host.run_until(lambda: "broker-2" not in host.client.brokers, MINUTE)
    host.advance(MINUTE)
    assert_consistent(host)
    assert not [r for r in host.records[count:] if r.envelope.type == "BundleAssigned"
                and r.envelope.payload.get("reason") == "orphan"]


def test_undrain_stops_the_moves_not_started_and_a_restarted_leader_resumes_a_drain() -> None:
    host = host_of()
    before = held(host, "broker-1")
    call(host, DrainBroker, broker="broker-1", rate_per_minute=2, by="ops")
    host.advance(1_000)
    host.crash(LEADER)  # the drain is in the log: the next leader goes on with it
    host.restart(LEADER)
    host.advance(2 * MINUTE)
    assert 1 <= len(before) - len(held(host, "broker-1")) < len(before)
    undrained = call(host, UndrainBroker, broker="broker-1", by="ops").first("BrokerUndrained")
    assert undrained is not None and undrained["cancelled"] >= 1
    left = held(host, "broker-1")
    host.advance(3 * MINUTE)
    assert len(held(host, "broker-1")) >= len(left) - 1  # at most one was handing over
    assert call(host, UndrainBroker, broker="broker-1", by="ops").events == ()
    assert drain_history(host.records).violations() == []
    assert_consistent(host)


def test_drain_refusals_record_only_the_leaders_rejection() -> None:
    host = host_of(brokers=2)
    call(host, DrainBroker, broker="broker-1", rate_per_minute=60, by="ops")
    for broker, rate, named in (("broker-2", 60.0, "last broker"), ("broker-9", 60.0, "'broker-9'"),
                                ("broker-2", float("nan"), "nan")):
        with pytest.raises(InvalidInput, match=named):
            call(host, DrainBroker, broker=broker, rate_per_minute=rate, by="ops")
    assert len(list(host.events("BrokerDrainRequested"))) == 1
    # An operator's transfer to the drained broker is refused by the namespace's writer.
    bundle = next(b for b in bundles(host) if host.view.owner(b) == "broker-2")
    with pytest.raises(InvalidInput, match="'broker-1' is drained"):
        call(host, UnloadBundle, bundle=bundle, dst="broker-1")


# -- lbctl -----------------------------------------------------------------------------------------


@pytest.fixture
def kept() -> Iterator[InProcessHost]:
    host = host_of()
    with using(Cluster(InProcLink(host))):
        yield host
    assert_consistent(host)


def test_lbctl_drain_wait_status_undrain(kept: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    count = len(held(kept, "broker-2"))
    code, out, _ = lbctl(capsys, "brokers", "drain", "broker-2", "--rate", "120/min", "--wait")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (f"draining broker-2: {count} bundle(s) to move at 120/min; "
                        "it takes no new bundles until undrained")
    assert lines[1].startswith("broker-2 [") and "120/min, ETA" in lines[1]
    assert lines[-1] == "broker-2 is empty" and held(kept, "broker-2") == []
    code, out, _ = lbctl(capsys, "balancer", "status")
    assert code == 0 and "state: draining (broker-2: " + f"{count} of {count} moved)" in out and f"draining: broker-2 ({count} of {count} moved, 0 left" in out
    code, out, _ = lbctl(capsys, "balancer", "status", "--json")
    assert json.loads(out)["draining"][0]["broker"] == "broker-2"
    code, out, _ = lbctl(capsys, "brokers", "undrain", "broker-2")
    assert code == 0 and out.startswith("broker-2 back in service; 0 move(s) not started cancelled")
    code, out, _ = lbctl(capsys, "brokers", "undrain", "broker-2")
    assert code == 0 and "was not drained; nothing recorded" in out
    assert len(list(kept.events("BrokerUndrained"))) == 1


@pytest.mark.parametrize(("argv", "named"), [
    (["broker-2", "--rate", "0"], "--rate '0'"),
    (["broker-2", "--rate=-3"], "--rate '-3'"),
    (["broker-2", "--rate", "nan"], "--rate 'nan'"),
    (["broker-2", "--rate", "inf"], "--rate 'inf'"),
    (["broker-9"], "'broker-9'"),
])
def test_lbctl_bad_drain_is_one_line_exit_2_nothing_recorded(
        kept: InProcessHost, capsys: pytest.CaptureFixture[str], argv: list[str], named: str) -> None:
    before = len(kept.records)
    code, out, err = lbctl(capsys, "brokers", "drain", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and named in err
    assert [r.envelope.type for r in kept.records[before:] if r.envelope.key == "_leader"
            and r.envelope.type != "LeaderHeartbeat"] == []


def test_lbctl_drain_of_every_broker_left_is_refused(kept: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    assert lbctl(capsys, "brokers", "drain", "broker-1", "--rate", "600")[0] == 0
    assert lbctl(capsys, "brokers", "drain", "broker-2", "--rate", "600")[0] == 0
    before = len(list(kept.events("BrokerDrainRequested")))
    code, _, err = lbctl(capsys, "brokers", "drain", "broker-3")
    assert code == 2 and "'broker-3' is the last broker not drained" in err
    assert len(list(kept.events("BrokerDrainRequested"))) == before
    assert not list(kept.events("CommandRejected"))


def test_lbctl_restart_plan_drains_restarts_and_undrains_each(kept: InProcessHost,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "brokers", "restart-plan", "broker-1", "broker-3", "--rate", "600/min")
    assert code == 0, out
    assert "[1/2] broker-1: draining" in out and "[2/2] broker-3: back in service" in out
    left = [r.envelope.payload["broker_id"] for r in kept.events("BrokerLeft")]
    assert left == ["broker-1", "broker-3"]
    assert [r.envelope.payload["broker"] for r in kept.events("BrokerUndrained")] == ["broker-1", "broker-3"]
    assert not [r for r in kept.events("BundleAssigned") if r.envelope.payload.get("reason") == "orphan"]
    assert drain_history(kept.records).violations() == []
    assert all_owned(kept)
    _ = BrokerLeft
