"""The operator's hold on the balancer on the in-process host: pause, resume, throttle, status.

What an operator would notice: while paused no shedding move starts (and placing an unowned
bundle still works); the pause ends by itself at its time, on the leader's clock, recorded; the
throttle's caps hold over the whole log; ``lbctl balancer status`` says paused/executing/idle/
stalled with the figures; bad input is one line, exit 2, nothing recorded.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from actors.runtime import InProcessHost
from actors.settings import LEADER
from balancer.config import LoadBalancerConfig
from balancer.control import Caps, Move, Throttle, caps_exceeded, parse_duration, pause_duration_ms
from balancer.errors import MalformedInput
from events.catalog import AssignBundle, LookupBundle, PauseBalancer, ResumeBalancer
from lbctl.attach import using
from lbctl.main import main
from projections.control import control_history
from tests.support.cluster_scenarios import (
    all_owned,
    assert_consistent,
    bundles,
    call,
    make_host,
    shed_events,
)

MINUTE = 60_000


def shed_host(**keys: object) -> InProcessHost:
    """Every bundle on broker-1 under load, so that shedding has work for several cycles."""
    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False,
                                              "loadBalancerBrokerThresholdShedderPercentage": 2, **keys})
    host = make_host(config, rate=30_000.0, bundles=8)
    for bundle in bundles(host):
        call(host, AssignBundle, bundle=bundle, dst="broker-1", reason="admin")
    assert host.run_until(lambda: all_owned(host), 5_000)
    return host


def lbctl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the pure parts ----------------------------------------------------------------------------


def test_the_throttle_starts_moves_in_order_within_every_cap() -> None:
    throttle = Throttle(Caps(per_broker=1, cluster=2, per_minute=3))
    for i, (src, dst) in enumerate([("a", "b"), ("a", "c"), ("d", "e"), ("f", "g")]):
        assert throttle.offer(Move(f"t/n/{i}", src, dst, 0))
    assert not throttle.offer(Move("t/n/0", "a", "b", 0))  # queued once
    first = throttle.due(0)
    assert [m.bundle for m in first] == ["t/n/0", "t/n/2"]  # t/n/1 waits for broker a
    for move in first:
        throttle.started(move, move.dst, 0)
    assert throttle.due(1) == []  # the cluster cap (2 in flight)
    throttle.finished("t/n/0")
    assert [m.bundle for m in throttle.due(2)] == ["t/n/1"]  # its turn came; order kept
    throttle.started(Move("t/n/1", "a", "c", 0), "c", 2)
    throttle.finished("t/n/1")
    throttle.finished("t/n/2")
    assert throttle.due(3) == []  # three started within the minute
    assert [m.bundle for m in throttle.due(MINUTE + 1)] == ["t/n/3"]


def test_caps_exceeded_names_each_breach() -> None:
    from balancer.control import MoveSpan

    caps = Caps(per_broker=1, cluster=5, per_minute=10)
    fine = [MoveSpan("x", "a", "b", 0, 10), MoveSpan("y", "a", "c", 10, 20)]
    assert caps_exceeded(fine, caps) == []
    over = [MoveSpan("x", "a", "b", 0, 10), MoveSpan("y", "a", "c", 5, 20)]
    assert caps_exceeded(over, caps) == ["5: y made 2 moves in flight on a (per-broker cap 1)"]


@pytest.mark.parametrize("text", ["0", "0s", "-5m", "nan", "inf", "5x", ""])
def test_a_duration_that_is_not_a_positive_time_is_named(text: str) -> None:
    with pytest.raises(MalformedInput, match=f"--for '{text}'"):
        parse_duration(text)


def test_a_pause_longer_than_the_maximum_is_refused() -> None:
    assert pause_duration_ms(parse_duration("1h"), 24 * 60 * MINUTE) == 60 * MINUTE
    with pytest.raises(MalformedInput, match="--for 2d: longer than the longest pause allowed, 1d"):
        pause_duration_ms(parse_duration("2d"), 24 * 60 * MINUTE)


# -- the leader ----------------------------------------------------------------------------------


def test_a_pause_stops_shedding_until_its_time_is_up_and_placement_goes_on() -> None:
    host = shed_host()
    receipt = call(host, PauseBalancer, duration_ms=5 * MINUTE, reason="incident", by="test")
    paused = receipt.first("BalancerPaused")
    assert paused is not None and paused["by"] == "test"
    host.advance(4 * MINUTE)
    assert shed_events(host) == []
    # Availability first: a new namespace's bundles are placed while paused.
    from events.catalog import CreateNamespace

    call(host, CreateNamespace, namespace="public/new", bundles=2)
    for bundle in bundles(host, "public/new"):
        call(host, LookupBundle, bundle=bundle)
    assert host.run_until(lambda: all_owned(host), 5_000)
    host.advance(3 * MINUTE)
    assert shed_events(host), "shedding came back once the pause expired"
    ends = [r.envelope.payload for r in host.events("BalancerResumed")]
    assert ends == [{"since_ms": paused["since_ms"], "at_ms": paused["until_ms"], "by": "expired"}]
    history = control_history(host.records)
    assert history.violations() == []
    assert_consistent(host)


def test_resume_ends_the_pause_early_and_a_second_resume_records_nothing() -> None:
    host = shed_host()
    call(host, PauseBalancer, duration_ms=60 * MINUTE, reason="deploy", by="ops")
    host.advance(2 * MINUTE)
    assert call(host, ResumeBalancer, by="ops").first("BalancerResumed") is not None
    count = len(host.records)
    assert call(host, ResumeBalancer, by="ops").events == ()
    assert [r.envelope.type for r in host.records[count:] if r.envelope.key == "_leader"] == []
    host.advance(2 * MINUTE)
    assert shed_events(host)


def test_the_throttle_caps_hold_over_the_log() -> None:
    host = shed_host(loadBalancerMaxMovesInFlightPerBroker=1, loadBalancerMaxMovesInFlight=1,
                     loadBalancerMaxMovesPerMinute=1)
    host.advance(10 * MINUTE)
    history = control_history(host.records)
    assert len(history.spans) >= 3, "shedding went on, one move at a time"
    assert history.violations(Caps(per_broker=1, cluster=1, per_minute=1)) == []
    # The same history judged against tighter caps than it ran with is caught: the check bites.
    starts = sorted(s.start_ms for s in history.spans)
    assert all(b - a >= MINUTE for a, b in itertools.pairwise(starts))
    assert_consistent(host)
    # Each run replaces what waits: a slow throttle does not go on with a plan made on old load.
    free = shed_host(loadBalancerMaxMovesInFlightPerBroker=1000, loadBalancerMaxMovesInFlight=1000,
                     loadBalancerMaxMovesPerMinute=1000)
    free.advance(10 * MINUTE)
    assert len(history.spans) <= len(control_history(free.records).spans) + 2


def test_the_per_broker_cap_holds_for_the_destinations_placement_picks() -> None:
    # Three loaded brokers and an empty fourth: each run's moves have no destination of their
    # own, and placement would send every one of them to the empty broker in the same tick.
    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False,
                                              "loadBalancerBrokerThresholdShedderPercentage": 2,
                                              "loadBalancerMaxMovesInFlightPerBroker": 2})
    host = make_host(config, brokers=4, rate=120_000.0, bundles=12)
    host.command_latency_ms = 20  # a handover takes time, so moves of one tick overlap
    owners = ["broker-1", "broker-2", "broker-3"]
    for i, bundle in enumerate(bundles(host)):
        call(host, AssignBundle, bundle=bundle, dst=owners[i % 3], reason="admin")
    assert host.run_until(lambda: all_owned(host), 5_000)
    host.advance(10 * MINUTE)
    history = control_history(host.records)
    into = [s for s in history.spans if s.dst == "broker-4"]
    assert len(into) >= 3, "the empty broker took bundles from the loaded ones"
    assert history.violations(Caps(per_broker=2, cluster=10, per_minute=30)) == []
    assert_consistent(host)


def test_moves_over_a_cap_wait_in_the_queue_that_status_shows() -> None:
    host = shed_host(loadBalancerMaxMovesPerMinute=1)
    leader = host.bodies[LEADER]

    def queued() -> bool:
        return bool(leader.status()["control"]["throttle"]["queue"])

    assert host.run_until(queued, 5 * MINUTE)
    control = leader.status()["control"]
    assert control["throttle"]["startedLastMinute"] == 1
    assert control["lastCycle"]["outcome"] == "moves"
    # The run's own figures ride along (the dashboard's "why not" shows them for a skip).
    assert {"average", "threshold"} <= set(control["lastCycle"]["inputs"])
    assert control["lastCycle"]["inputs"]["threshold"] == 0.02


# -- lbctl ------------------------------------------------------------------------------------


@pytest.fixture
def kept() -> Iterator[InProcessHost]:
    host = shed_host()
    with using(Cluster(InProcLink(host))):
        yield host
    assert_consistent(host)


def test_lbctl_pause_status_resume(kept: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "balancer", "status")
    assert code == 0 and out.startswith("state: ")
    code, out, _ = lbctl(capsys, "balancer", "pause", "--for", "5m", "--reason", "incident 7")
    assert code == 0 and "300 s from now: incident 7" in out
    code, out, _ = lbctl(capsys, "balancer", "status", "--json")
    status = json.loads(out)
    assert status["state"] == "paused"
    assert status["paused"]["reason"] == "incident 7" and status["paused"]["by"].startswith("lbctl")
    code, out, _ = lbctl(capsys, "balancer", "resume")
    assert code == 0 and "balancer resumed" in out
    paused = [r for r in kept.events("BalancerPaused")]
    assert len(paused) == 1


@pytest.mark.parametrize(("argv", "named"), [
    (["--for", "0", "--reason", "x"], "--for '0'"),
    (["--for", "nan", "--reason", "x"], "--for 'nan'"),
    (["--for=-5m", "--reason", "x"], "--for '-5m'"),
    (["--for", "2d", "--reason", "x"], "--for 2d"),
    (["--for", "5m", "--reason", " "], "--reason ' '"),
])
def test_lbctl_bad_pause_is_one_line_exit_2_nothing_recorded(
        kept: InProcessHost, capsys: pytest.CaptureFixture[str], argv: list[str], named: str) -> None:
    before = len(kept.records)
    code, out, err = lbctl(capsys, "balancer", "pause", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and named in err
    assert [r.envelope.type for r in kept.records[before:] if r.envelope.key == "_leader"] == []


def test_status_says_stalled_when_a_broker_sends_no_load(capsys: pytest.CaptureFixture[str]) -> None:
    host = shed_host(loadBalancerStalledLoadReportSeconds=12)
    with using(Cluster(InProcLink(host))):
        code, out, _ = lbctl(capsys, "balancer", "status", "--json")
        assert json.loads(out)["stalled"] == []
        host.crash("broker:broker-3")  # silent from now on, not yet expired (30 s of session)
        host.advance(20_000)
        code, out, _ = lbctl(capsys, "balancer", "status")
    assert code == 0
    assert out.startswith("state: stalled\n")
    assert "stalled: no fresh load data from broker-3 (loadBalancerStalledLoadReportSeconds=12)" in out


# -- what status says --------------------------------------------------------------------------


def _leader_status(**control: object) -> dict[str, object]:
    base: dict[str, object] = {
        "paused": None, "oldestMoveMs": 0, "nowMs": 1_000_000, "movesLastHour": 3, "maxPauseMs": 1,
        "lastCycle": {"atMs": 990_000, "outcome": "moves", "moves": 4},
        "throttle": {"caps": {"perBroker": 2, "cluster": 10, "perMinute": 30}, "inFlight": 1,
                     "startedLastMinute": 1, "queue": [{"bundle": "t/n/x", "src": "b1", "queuedMs": 1}],
                     "moving": []}}
    base.update(control)
    return {"name": "leader", "leads": True, "my_epoch": 3, "now_ms": 1_000_000, "control": base,
            "position": {0: 90}, "load_seen": {"b1": 999_000, "b2": 999_000}}


def test_status_without_a_leader_is_stalled_naming_it() -> None:
    from actors.control_status import status_document, status_text

    document = status_document(LoadBalancerConfig(), None, {0: 100}, ["b1"])
    assert document["state"] == "stalled"
    assert status_text(document) == "state: stalled\n  stalled: no leader: no body holds the newest epoch"


def test_status_executing_n_of_m_and_each_stall_reason() -> None:
    from actors.control_status import status_document, status_text

    config = LoadBalancerConfig()
    document = status_document(config, _leader_status(), {0: 90}, ["b1", "b2"])
    assert document["state"] == "executing" and document["executing"] == {"done": 2, "of": 4}
    text = status_text(document)
    assert text.startswith("state: executing (2 of 4)\n")
    assert "throttle: 1 in flight, 1 queued" in text and "queued: t/n/x (from b1)" in text
    stuck = status_document(config, _leader_status(oldestMoveMs=301_000), {0: 10_090}, ["b1", "b2", "b3"])
    assert stuck["state"] == "stalled"
    assert stuck["stalled"] == [
        "a move has been in flight 301 s (loadBalancerStalledMoveSeconds=300)",
        "no fresh load data from b3 (loadBalancerStalledLoadReportSeconds=60)",
        "the leader's fold is 10000 records behind the log (loadBalancerStalledFoldLagRecords=10000)"]


@pytest.mark.parametrize("key", ["loadBalancerMaxMovesInFlightPerBroker", "loadBalancerMaxMovesInFlight",
                                 "loadBalancerMaxMovesPerMinute", "loadBalancerMaxPauseMinutes"])
@pytest.mark.parametrize("value", ["0", "-3", "nan"])
def test_a_cap_of_zero_negative_or_nan_is_refused_naming_the_key(key: str, value: str) -> None:
    from balancer.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{key}: '{value}' "):
        LoadBalancerConfig.from_mapping({key: value})
