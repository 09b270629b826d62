"""Drive mode against the real Pulsar 4.0.7 test cluster, with skewed real traffic: the
project's decisions are sent to Pulsar's admin API, Pulsar's ownership channel confirms each
destination, a dry run sends and records nothing, a cluster that sheds by itself is refused, an
operator's pause holds the moves back, and in review mode nothing is sent before an approval.

The traffic of this module runs in a namespace of its own, every bundle of it first put on one
broker (Pulsar's own unloads with a destination), so the first broker carries all of it. The
project's settings are the shipped conf/attach-one-host.conf (UniformLoadShedder: on one host
every broker shows the same usage, so TransferShedder sees no load; message rates and throughput
tell the brokers apart).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.cluster.kept import read_spec
from bench.pulsar_traffic import TrafficPlan, run_traffic
from events.catalog import (
    BalancerPaused,
    BalancerResumed,
    BrokerDrainRequested,
    BrokerUndrained,
    ExecutionConfirmed,
    ExecutionRequested,
    LoadReported,
    ProposalApproved,
)
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.admin_http import AdminHttp
from lbctl.main import main
from projections.control import control_history
from projections.drain import drain_history
from projections.proposals import ApprovalHistory
from tests.pulsar_server import PulsarCluster, admin_call

pytestmark = [pytest.mark.pulsar, pytest.mark.timeout(600)]

CHANNEL = "persistent://pulsar/system/loadbalancer-service-unit-state"
ONE_HOST = Path(__file__).resolve().parents[2] / "conf" / "attach-one-host.conf"


@dataclass
class Skewed:
    cluster: PulsarCluster
    namespace: str
    conf: Path
    stop: threading.Event


def _owners(cluster: PulsarCluster, namespace: str) -> dict[str, str]:
    """Bundle range -> the broker that owns it, as each broker answers for itself."""
    out: dict[str, str] = {}
    for broker in cluster.broker_ids:
        status, found = cluster.admin("GET", f"/admin/v2/brokers/{cluster.cluster_name}/{broker}/ownedNamespaces")
        assert status == 200, found
        for name in found:
            if name.rpartition("/")[0] == namespace:
                out[name.rpartition("/")[2]] = broker
    return out


@pytest.fixture(scope="module")
def skewed(pulsar_cluster: PulsarCluster) -> Iterator[Skewed]:
    """Zipf traffic on 16 topics of a new namespace of 8 bundles, all of them on broker 0."""
    cluster = pulsar_cluster
    namespace = f"public/drive-{uuid.uuid4().hex[:8]}"
    status, body = cluster.admin("PUT", f"/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": 8}})
    assert status == 204, body
    stop = threading.Event()
    plan = TrafficPlan(service_url=cluster.service_url, namespace=namespace, topics=16, rate=400.0,
                       seconds=900.0, zipf=1.2, size=1024, topic_prefix="drive")
    failed: list[BaseException] = []

    def traffic() -> None:
        try:
            run_traffic(plan, stop=stop)
        except BaseException as exc:  # named by the tests, not lost in a thread
            failed.append(exc)

    worker = threading.Thread(target=traffic, daemon=True)
    worker.start()
    _everything_on(cluster, namespace, cluster.broker_ids[0])
    assert not failed, failed
    time.sleep(15)  # Pulsar's load reports follow the new load
    try:
        yield Skewed(cluster, namespace, ONE_HOST, stop)
    finally:
        stop.set()
        worker.join(timeout=60)


def _everything_on(cluster: PulsarCluster, namespace: str, broker: str) -> None:
    """Wait for the traffic's topics to be served, then unload every bundle to ``broker``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _owners(cluster, namespace):
        time.sleep(1)
    time.sleep(3)
    for bundle, owner in sorted(_owners(cluster, namespace).items()):
        if owner != broker:
            status, body = cluster.admin(
                "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload?destinationBroker={broker}")
            assert status == 204, body


def _records(state: Path) -> list[Record]:
    async def read() -> list[Record]:
        async with LocalEventLog(state / "log", fsync=False) as log:
            return list((await log.read()).records)

    return asyncio.run(read())


def _of(records: list[Record], kind: type) -> list[Any]:
    return [r.envelope.typed for r in records if isinstance(r.envelope.typed, kind)]


def _spread(records: list[Record], until_ms: int | None) -> dict[str, float]:
    """Each broker's throughput (in + out, bytes/s) in its last report of Pulsar's up to ``until_ms``."""
    last: dict[str, float] = {}
    for record in records:
        event = record.envelope.typed
        if isinstance(event, LoadReported) and (until_ms is None or record.envelope.ts_ms <= until_ms):
            load = event.broker_load
            last[event.broker_id] = float(load.get("msg_throughput_in", 0)) + float(load.get("msg_throughput_out", 0))
    return last


def _max_over_mean(values: dict[str, float]) -> float:
    total = sum(values.values())
    return 1.0 if not values or total <= 0 else max(values.values()) / (total / len(values))


def test_a_dry_run_prints_what_it_would_send_and_sends_and_records_nothing(
        skewed: Skewed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = skewed.cluster
    before = _owners(cluster, skewed.namespace)
    state = tmp_path / "dry"
    assert main(["attach", cluster.web_url, "--state-dir", str(state), "--mode", "drive", "--dry-run",
                 "--conf", str(skewed.conf), "--minutes", "1.2", "--plain"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert "dry run: would send PUT /admin/v2/namespaces/" in out
    kinds = {r.envelope.type for r in _records(state)}
    assert not {t for t in kinds if t.startswith(("Proposal", "Execution"))}
    assert _owners(cluster, skewed.namespace) == before


def test_drive_executes_the_decisions_and_pulsars_channel_confirms_each_destination(
        skewed: Skewed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = skewed.cluster
    state = tmp_path / "drive"
    assert main(["attach", cluster.web_url, "--state-dir", str(state), "--mode", "drive",
                 "--conf", str(skewed.conf), "--minutes", "1.2", "--plain"]) == 0
    capsys.readouterr()
    records = _records(state)
    requested = _of(records, ExecutionRequested)
    confirmed = _of(records, ExecutionConfirmed)
    assert requested, "drive mode executed nothing"
    assert confirmed, "Pulsar's channel confirmed no execution"
    by_id = {r.execution_id: r for r in requested}
    for done in confirmed:
        assert done.owner == by_id[done.execution_id].dst  # Owned at the destination
        assert done.evidence.startswith(f"pulsar:{CHANNEL}@")  # as Pulsar's channel said it
    ends: dict[str, int] = {}
    for record in records:
        if record.envelope.type in ("ExecutionRefused", "ExecutionConfirmed", "ExecutionFailed"):
            ends[record.envelope.payload["execution_id"]] = ends.get(record.envelope.payload["execution_id"], 0) + 1
    assert ends == {execution_id: 1 for execution_id in by_id}  # each ends once, none open
    first_ms = min(r.envelope.ts_ms for r in records if isinstance(r.envelope.typed, ExecutionRequested))
    before, after = _spread(records, first_ms), _spread(records, None)
    with capsys.disabled():
        print(f"\nPulsar's reported broker throughput before the first execution: {before} "
              f"(max/mean {_max_over_mean(before):.3f}); at the end: {after} "
              f"(max/mean {_max_over_mean(after):.3f}); {len(requested)} executions, "
              f"{len(confirmed)} confirmed")
    driven = confirmed[0].bundle
    assert main(["explain", driven, "--state-dir", str(state)]) == 0
    explained = capsys.readouterr().out
    assert f"driven by proposal {by_id[confirmed[0].execution_id].proposal_id}" in explained
    assert "carried out by Pulsar: pulsar:" in explained


def test_drive_refuses_a_cluster_whose_own_shedding_is_on(
        pulsar_cluster: PulsarCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = "/admin/v2/brokers/configuration/loadBalancerSheddingEnabled"
    status, body = pulsar_cluster.admin("POST", f"{path}/true")
    assert status in (200, 204), body
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the dynamic setting reaches every broker
            status, found = pulsar_cluster.admin("GET", "/admin/v2/brokers/configuration/runtime")
            if status == 200 and found.get("loadBalancerSheddingEnabled") == "true":
                break
            time.sleep(0.5)
        state = tmp_path / "refused"
        assert main(["attach", pulsar_cluster.web_url, "--state-dir", str(state), "--mode", "drive",
                     "--minutes", "0.2"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "loadBalancerSheddingEnabled" in err[0]
        assert not (state / "log").exists()  # refused before anything was read or recorded
    finally:
        pulsar_cluster.admin("POST", f"{path}/false")


def test_an_operators_pause_holds_drive_mode_back_and_its_status_says_so(
        skewed: Skewed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = skewed.cluster
    state = tmp_path / "paused"
    seen: dict[str, Any] = {}
    operator = threading.Thread(target=_pause_then_look, args=(state, seen), daemon=True)
    operator.start()  # attach takes the main thread: it handles SIGINT/SIGTERM
    assert main(["attach", cluster.web_url, "--state-dir", str(state), "--mode", "drive", "--conf",
                 str(skewed.conf), "--minutes", "1.4", "--plain", "--web-service-port", "0"]) == 0
    operator.join(timeout=60)
    assert seen.get("paused") == 0, seen
    status = seen["status"]
    assert status["state"] == "paused" and status["paused"]["reason"] == "pulsar test", status["stalled"]
    records = _records(state)
    (pause,) = _of(records, BalancerPaused)
    assert [e.by for e in _of(records, BalancerResumed)] == ["expired"]
    requested = [r.envelope.ts_ms for r in records if isinstance(r.envelope.typed, ExecutionRequested)]
    assert not [t for t in requested if pause.since_ms <= t < pause.until_ms]
    assert control_history(records).paused_moves() == []
    with capsys.disabled():
        print(f"\npaused {pause.since_ms}..{pause.until_ms}; {len(requested)} execution(s), "
              f"{sum(1 for t in requested if t >= pause.until_ms)} after the pause")


def _pause_then_look(state: Path, seen: dict[str, Any]) -> None:
    """The operator: once attach serves its web service, pause it through ``lbctl --state-dir``
    and read the status over REST."""
    seen["paused"] = _once_serving(state, ["balancer", "pause", "--for", "30s", "--reason", "pulsar test"], 150)
    seen["status"] = AdminHttp(str(read_spec(state).web_service_url)).call("GET", "/bb/v1/balancer/status")


def _once_serving(state: Path, verb: list[str], timeout_s: float) -> int:
    """``lbctl VERB --state-dir STATE`` once attach serves its web service, again while it is
    refused (retriable until the hook has started); its exit status."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not _serving(state):
        time.sleep(0.5)
    code = 1
    while code != 0 and time.monotonic() < deadline:
        time.sleep(1)
        code = main([*verb, "--state-dir", str(state)])
    return code


def _serving(state: Path) -> bool:
    try:
        return bool(read_spec(state).web_service_url)
    except Exception:  # not written yet
        return False


def test_in_review_mode_nothing_reaches_pulsar_before_an_operator_approves(
        skewed: Skewed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = skewed.cluster
    _everything_on(cluster, skewed.namespace, cluster.broker_ids[0])  # the earlier tests spread it
    time.sleep(15)
    state, conf = tmp_path / "review", tmp_path / "review.conf"
    conf.write_text(skewed.conf.read_text() + "\nloadBalancerExecution=review\n"
                    "loadBalancerProposalMaxAgeSeconds=600\nloadBalancerProposalLoadTolerance=1000\n")
    seen: dict[str, Any] = {}
    operator = threading.Thread(target=_approve_the_first, args=(state, seen), daemon=True)
    operator.start()
    assert main(["attach", cluster.web_url, "--state-dir", str(state), "--mode", "drive", "--conf",
                 str(conf), "--minutes", "1.3", "--plain", "--web-service-port", "0"]) == 0
    operator.join(timeout=60)
    assert seen.get("approved") == 0, seen
    assert seen["before"] == [], "an execution before the approval"
    records = _records(state)
    (approval,) = _of(records, ProposalApproved)
    assert approval.proposal_id == seen["id"] and approval.by == "anonymous"  # a service without auth
    requested = _of(records, ExecutionRequested)
    assert requested and {r.proposal_id for r in requested} == {seen["id"]}
    assert _of(records, ExecutionConfirmed), "Pulsar's channel confirmed no approved move"
    history = ApprovalHistory(review=True)
    for record in records:
        history.take(record.envelope.typed, record.envelope.ts_ms)
    assert history.violations() == []
    with capsys.disabled():
        print(f"\nreview: {seen['id']} waited {seen['waited_s']:.0f} s with nothing sent; approved by "
              f"{approval.by}; {len(requested)} execution(s) sent after it")


def _approve_the_first(state: Path, seen: dict[str, Any]) -> None:
    """The operator: wait for a proposal with moves to wait for review, check nothing was sent,
    then approve it through ``lbctl proposals approve ID --state-dir``."""
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline and not _serving(state):
        time.sleep(0.5)
    http = AdminHttp(str(read_spec(state).web_service_url))
    waiting: list[dict[str, Any]] = []
    since = time.monotonic()
    while time.monotonic() < deadline and not waiting:
        time.sleep(1)
        waiting = [p for p in http.call("GET", "/bb/v1/proposals") if p["status"] == "pending" and p["moves"]]
    if not waiting:
        seen["approved"] = "no proposal waited"
        return
    time.sleep(12)  # a decision cycle later: it still waits, and nothing went out
    seen["id"], seen["waited_s"] = waiting[0]["id"], time.monotonic() - since
    seen["before"] = [r.execution_id for r in _of(_records(state), ExecutionRequested)]
    seen["approved"] = main(["proposals", "approve", seen["id"], "--state-dir", str(state)])


def test_an_operators_drain_empties_broker_0_at_its_rate_and_undrain_returns_it(
        skewed: Skewed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = skewed.cluster
    drained, other = cluster.broker_ids[0], cluster.broker_ids[1]
    _everything_on(cluster, skewed.namespace, drained)  # the earlier tests spread it
    health = admin_call(cluster.web_urls[0], "GET", "/admin/v2/brokers/health?topicVersion=V2")
    assert health[0] == 200, health  # Pulsar's health check owns broker 0's heartbeat namespace
    state = tmp_path / "drain"
    seen: dict[str, Any] = {}
    operator = threading.Thread(target=_drain_then_undrain, args=(state, drained, skewed, seen), daemon=True)
    operator.start()
    assert main(["attach", cluster.web_url, "--state-dir", str(state), "--mode", "drive", "--conf",
                 str(skewed.conf), "--minutes", "1.3", "--plain", "--web-service-port", "0"]) == 0
    operator.join(timeout=60)
    out = capsys.readouterr().out
    assert seen.get("drained") == 0 and seen.get("undrained") == 0, seen
    assert seen["owners"] and set(seen["owners"].values()) == {other}, seen["owners"]  # Pulsar's own answers
    assert [d["broker"] for d in seen["status"]["draining"]] == [drained], seen["status"]
    assert seen["after"]["drained"] is False
    # Pulsar keeps the heartbeat namespace on its broker; it assigns it without its channel, so the
    # mirror never shows it and the drain neither tries to move it nor waits for it.
    assert seen["heartbeat"] == {drained}, seen["heartbeat"]
    assert f"{drained} is empty" in out or f"{drained} holds only the" in out
    records = _records(state)
    (asked,) = _of(records, BrokerDrainRequested)
    assert asked.broker == drained and asked.rate_per_minute == 60 and asked.by == "anonymous"
    (ended,) = _of(records, BrokerUndrained)
    assert ended.broker == drained and ended.since_ms == asked.since_ms
    pid = f"drain-{drained}-{asked.since_ms}"
    sent = [(r.envelope.ts_ms, r.envelope.typed) for r in records if isinstance(r.envelope.typed, ExecutionRequested)]
    moves = [r for _, r in sent if r.proposal_id == pid]
    assert moves and all(r.src == drained and r.dst == other for r in moves)
    assert not [r for r in moves if r.bundle.startswith(f"pulsar/{drained}")]
    assert not [r for t, r in sent if asked.since_ms <= t < ended.at_ms and r.dst == drained]  # nothing of ours to it
    confirmed = {c.execution_id: c for c in _of(records, ExecutionConfirmed)}
    for move in moves:
        assert confirmed[move.execution_id].evidence.startswith(f"pulsar:{CHANNEL}@")  # the channel said so
    times = [t for t, r in sent if r.proposal_id == pid]
    assert all(t - times[0] >= k * 1000 - 500 for k, t in enumerate(times)), times  # 60/min at most
    with capsys.disabled():
        print(f"\ndrain of {drained}: {len(moves)} move(s) at 60/min over {(times[-1] - times[0]) / 1000:.1f} s, "
              f"all confirmed; audit: {drain_history(records).violations()}; stays: {seen['progress'].get('stays')} "
              f"({seen['progress'].get('kept')}); --wait said: "
              f"{[line for line in out.splitlines() if drained in line and ('stay' in line or 'empty' in line)][-1:]}")


def _drain_then_undrain(state: Path, broker: str, skewed: Skewed, seen: dict[str, Any]) -> None:
    """The operator: drain ``broker`` through ``lbctl brokers drain --wait --state-dir``, look at
    Pulsar's owners and the status, then undrain it."""
    seen["drained"] = _once_serving(state, ["brokers", "drain", broker, "--rate", "60/min", "--wait",
                                            "--timeout", "90"], 100)
    seen["owners"] = _owners(skewed.cluster, skewed.namespace)
    seen["heartbeat"] = set(_owners(skewed.cluster, f"pulsar/{broker}").values())
    http = AdminHttp(str(read_spec(state).web_service_url))
    seen["progress"] = http.call("GET", f"/bb/v1/brokers/{broker}/drain")
    seen["status"] = http.call("GET", "/bb/v1/balancer/status")
    seen["undrained"] = main(["brokers", "undrain", broker, "--state-dir", str(state)])
    seen["after"] = http.call("GET", f"/bb/v1/brokers/{broker}/drain")
