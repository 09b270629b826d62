"""Drive mode against a real HTTP server answering as Pulsar's admin API, on logs written as the
mirror writes them: what is sent, the caps, and that every execution ends in exactly one
terminal event whatever happens (a refusal, no answer, a move elsewhere, a split, a shutdown, a
restart of attach)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from attach.drive import DriveRefused, Steering, preflight
from attach.execute import Executions
from attach.proposals import Proposal, ProposedMove
from attach.pulsar_admin import _reason, load_balancer_config
from balancer.config import LoadBalancerConfig
from balancer.errors import Unavailable
from events.catalog import (
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    Message,
)
from events.log.memory import MemoryEventLog
from events.log.port import Record
from projections.ownership import OwnershipProjection
from tests.support.fake_pulsar import FakePulsar, fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Mirrored


def _config(extra: str = "") -> LoadBalancerConfig:
    return LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "attachDriveExecutionTimeoutSeconds=30\n" + extra)


async def _skewed(m: Mirrored, brokers: tuple[str, ...] = ("b1", "b2")) -> list[str]:
    bundles = await m.cluster(list(brokers), bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    await _report(m, bundles)
    return bundles


async def _report(m: Mirrored, b: list[str]) -> None:
    await m.report("b1", {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0})
    await m.report("b2", {b[3]: 2.0})


async def _typed(log: MemoryEventLog) -> list[Record]:
    return [r for r in (await log.read()).records if r.envelope.type.startswith(("Execution", "Proposal"))]


async def _events(log: MemoryEventLog, kind: type[Message]) -> list[Any]:
    return [r.envelope.typed for r in await _typed(log) if isinstance(r.envelope.typed, kind)]


async def _ends(log: MemoryEventLog) -> dict[str, list[str]]:
    """Execution id -> the types of its terminal events, for every requested execution."""
    ends: dict[str, list[str]] = {}
    for record in await _typed(log):
        event = record.envelope.typed
        if isinstance(event, ExecutionRequested):
            ends.setdefault(event.execution_id, [])
        elif isinstance(event, ExecutionRefused | ExecutionConfirmed | ExecutionFailed):
            ends.setdefault(event.execution_id, []).append(record.envelope.type)
    return ends


async def _started(m: Mirrored, fake: FakePulsar, config: LoadBalancerConfig | None = None,
                   lines: list[str] | None = None, **kw: Any) -> Steering:
    out = lines if lines is not None else []
    steering = Steering(m.log, config or _config(), "drive", admin=fake.admin(kw.pop("timeout_s", 5.0)),
                        printer=out.append, **kw)
    await steering.start(m.clock())
    return steering


async def _cycle(m: Mirrored, steering: Steering, bundles: list[str], ms: int = 60_000) -> Proposal | None:
    m.clock.advance(ms)
    await _report(m, bundles)
    return await steering.cycle(m.clock())


async def test_a_decision_is_sent_as_an_unload_with_its_destination_and_confirmed_by_the_channel() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        lines: list[str] = []
        steering = await _started(m, fake, lines=lines)
        proposal = await _cycle(m, steering, bundles)
        assert proposal is not None and len(proposal.moves) == 3
        (call,) = fake.moves()  # one execution per cycle by default
        move = proposal.moves[0]
        assert call.path == f"/admin/v2/namespaces/{move.bundle}/unload"
        assert call.query == {"destinationBroker": "b2"}
        (request,) = await _events(m.log, ExecutionRequested)
        assert (request.proposal_id, request.bundle, request.src, request.dst) == \
            (proposal.proposal_id, move.bundle, "b1", "b2")
        assert request.decision["strategy"] == "TransferShedder" and request.request.startswith("PUT ")
        assert any("cycle_cap" in line for line in lines)
        await m.pulsar_transfer(move.bundle, "b1", "b2")
        await _cycle(m, steering, bundles, 1000)
        (confirmed,) = await _events(m.log, ExecutionConfirmed)
        assert (confirmed.execution_id, confirmed.owner) == (request.execution_id, "b2")
        assert confirmed.evidence.startswith("pulsar:loadbalancer-service-unit-state@")
        assert await _ends(m.log) == {request.execution_id: ["ExecutionConfirmed"]}


async def test_the_caps_per_cycle_and_per_minute_hold_moves_back() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    config = _config("attachDriveMaxExecutionsPerCycle=5\nattachDriveMaxExecutionsPerMinute=2\n")
    async with fake_pulsar() as fake:
        lines: list[str] = []
        steering = await _started(m, fake, config, lines)
        await _cycle(m, steering, bundles)
        assert len(fake.moves()) == 2
        assert sum("minute_cap" in line for line in lines) == 1


def test_one_execution_per_bundle_is_in_flight() -> None:
    executions = Executions(per_cycle=5, per_minute=10, timeout_ms=30_000)
    request = ExecutionRequested(execution_id="drive-1:0", proposal_id="drive-1", bundle="t/n/0x00000000_0xffffffff",
                                 kind="transfer", src="b1", dst="b2")
    executions._requested(request, 1000)
    move = ProposedMove("t/n/0x00000000_0xffffffff", "transfer", "b1", "b2", "Overloaded")
    selection = executions.select(Proposal("drive-2", "TransferShedder", "drive", 2000, (move,)),
                                  OwnershipProjection(), 2000)
    assert selection.send == [] and selection.held == [(move, "in_flight")]


async def test_a_refusal_ends_the_execution_with_pulsars_status_and_message() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar(FakePulsar(status=412, reason="Bundle is not owned by b1")) as fake:
        steering = await _started(m, fake)
        await _cycle(m, steering, bundles)
        await _cycle(m, steering, bundles, 1000)
    ends = await _ends(m.log)
    assert list(ends.values()) == [["ExecutionRefused"]]
    refused = [r.envelope.payload for r in await _typed(m.log) if r.envelope.type == "ExecutionRefused"]
    assert refused[0]["status"] == 412 and refused[0]["message"] == "Bundle is not owned by b1"


async def test_a_307_to_the_owner_is_followed_with_the_same_put() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar(FakePulsar(redirect=True)) as fake:
        steering = await _started(m, fake)
        await _cycle(m, steering, bundles)
        assert [(c.method, c.port) for c in fake.moves()] == [("PUT", fake.ports[0]), ("PUT", fake.ports[1])]
        assert fake.moves()[1].query == fake.moves()[0].query
    assert [r.envelope.type for r in await _typed(m.log)][-1] == "ExecutionAccepted"


async def test_no_answer_keeps_the_execution_open_until_the_channel_shows_it_or_time_is_up() -> None:
    m = Mirrored()
    bundles = await _skewed(m, ("b1", "b2"))
    async with fake_pulsar(FakePulsar(delay_s=1.5)) as fake:
        steering = await _started(m, fake, _config("loadBalanceSheddingDelayInSeconds=0\n"), timeout_s=0.2)
        first = await _cycle(m, steering, bundles)
        assert first is not None
        await m.pulsar_transfer(first.moves[0].bundle, "b1", "b2")  # Pulsar did it all the same
        second = await _cycle(m, steering, bundles)  # confirmed; and a second move, unanswered
        assert second is not None and second.moves
        await _cycle(m, steering, bundles, 31_000)  # past the 30 s timeout, before the next decision
    types = [r.envelope.type for r in await _typed(m.log) if r.envelope.type.startswith("Execution")]
    assert types.count("ExecutionUnanswered") == 2
    ends = await _ends(m.log)
    assert sorted(e for v in ends.values() for e in v) == ["ExecutionConfirmed", "ExecutionFailed"]
    (failed,) = await _events(m.log, ExecutionFailed)
    assert failed.reason == "timeout" and "unanswered" in failed.detail


async def test_a_bundle_owned_elsewhere_or_split_ends_its_execution_as_diverted_or_gone() -> None:
    m = Mirrored()
    bundles = await _skewed(m, ("b1", "b2", "b3"))
    await m.report("b3", {})
    async with fake_pulsar(FakePulsar()) as fake:
        steering = await _started(m, fake, _config("attachDriveMaxExecutionsPerCycle=2\n"))
        proposal = await _cycle(m, steering, bundles)
        assert proposal is not None
        one, two = (r.bundle for r in await _events(m.log, ExecutionRequested))
        dst = next(r.dst for r in await _events(m.log, ExecutionRequested) if r.bundle == one)
        elsewhere = next(b for b in ("b1", "b2", "b3") if b not in (dst, "b1"))
        await m.pulsar_transfer(one, "b1", elsewhere)  # the destination died: Pulsar chose another
        await m.pulsar_split(two, "b1", int(two.rsplit("/", 1)[1].split("_")[0], 16) + 0x1000)
        await _cycle(m, steering, bundles, 1000)
    failed = {f.bundle: f for f in await _events(m.log, ExecutionFailed)}
    assert failed[one].reason == "diverted" and failed[one].state["owner"] == elsewhere
    assert failed[two].reason == "gone" and failed[two].state["state"] == "Deleted"
    assert all(v == ["ExecutionFailed"] for v in (await _ends(m.log)).values())


async def test_attach_stopping_ends_every_open_execution() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake)
        await _cycle(m, steering, bundles)
        await m.pulsar_transfer((await _events(m.log, ExecutionRequested))[0].bundle, "b1", "b2", land=False)
        await steering.close(m.clock.advance(500))
    (failed,) = await _events(m.log, ExecutionFailed)
    assert failed.reason == "shutdown" and failed.state["state"] == "Assigning"
    assert list((await _ends(m.log)).values()) == [["ExecutionFailed"]]


@pytest.mark.parametrize("later_ms", [1000, 40_000], ids=["landed", "timed-out"])
async def test_an_execution_open_at_a_restart_is_resolved_from_the_log_or_timed_out(later_ms: int) -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake)
        await _cycle(m, steering, bundles)
        (request,) = await _events(m.log, ExecutionRequested)
        del steering  # attach dies here, nothing more of it runs
        if later_ms < 30_000:
            await m.pulsar_transfer(request.bundle, "b1", "b2")  # while attach was down
        m.reopen()
        lines: list[str] = []
        again = await _started(m, fake, lines=lines)
        await again.cycle(m.clock.advance(later_ms))
    ends = await _ends(m.log)
    assert ends == {request.execution_id: ["ExecutionConfirmed" if later_ms < 30_000 else "ExecutionFailed"]}
    assert len(fake.moves()) == 1  # nothing sent twice


async def test_a_dry_run_prints_what_it_would_send_and_records_and_sends_nothing() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    before = len((await m.log.read()).records)
    async with fake_pulsar() as fake:
        lines: list[str] = []
        steering = await _started(m, fake, lines=lines, dry_run=True)
        await _cycle(m, steering, bundles)
        assert fake.moves() == []
    assert await _typed(m.log) == [] and len((await m.log.read()).records) == before + 2  # the reports
    (sent,) = [line for line in lines if line.startswith("dry run: would send PUT /admin/v2/namespaces/")]
    assert "/unload?destinationBroker=b2" in sent


async def test_drive_refuses_a_cluster_whose_own_shedding_is_on_and_stops_if_it_comes_on() -> None:
    with pytest.raises(DriveRefused) as refused:
        preflight({"loadBalancerSheddingEnabled": "true"}, "http://127.0.0.1:1")
    assert "loadBalancerSheddingEnabled" in refused.value.message and "\n" not in refused.value.message
    preflight({"loadBalancerSheddingEnabled": "false"}, "http://127.0.0.1:1")
    m = Mirrored()
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        lines: list[str] = []
        steering = await _started(m, fake, lines=lines)
        fake.settings["loadBalancerSheddingEnabled"] = "true"  # an operator turned it on meanwhile
        await _cycle(m, steering, bundles)
        await _cycle(m, steering, bundles)
        assert fake.moves() == []
    assert sum("loadBalancerSheddingEnabled is now true" in line for line in lines) == 1
    assert await _events(m.log, ExecutionRequested) == []


class _Flaky(MemoryEventLog):
    """A log that refuses appends while ``down``."""

    down = False

    async def append(self, key: str, messages: Any, **kw: Any) -> list[Record]:
        if self.down:
            raise Unavailable("log down", value=key)
        return await super().append(key, messages, **kw)


async def test_a_log_outage_loses_no_record_and_sends_nothing_unrecorded() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    flaky = _Flaky(store=m.store, stamper=m.log._stamper)
    async with fake_pulsar() as fake:
        steering = Steering(flaky, _config(), "drive", admin=fake.admin(), printer=lambda _: None)
        await steering.start(m.clock())
        m.clock.advance(60_000)
        await _report(m, bundles)
        flaky.down = True
        await steering.cycle(m.clock())
        assert fake.moves() == [] and steering.unwritten  # the proposal waits; nothing was sent
        flaky.down = False
        await _cycle(m, steering, bundles, 1000)
    kinds = Counter(r.envelope.type for r in await _typed(m.log))
    assert kinds["ProposalRecorded"] == 1 and steering.unwritten == []



async def test_a_split_is_sent_with_pulsars_algorithm_and_confirmed_by_the_split_in_the_channel() -> None:
    m = Mirrored()
    bundles = await m.cluster(["b1", "b2"], bundles=2)
    await m.report("b1", {bundles[0]: 30.0})
    await m.report("b2", {bundles[1]: 1.0})
    config = _config("loadBalancerAutoBundleSplitEnabled=true\nloadBalancerNamespaceBundleMaxMsgRate=1000\n"
                     "loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0\n"
                     "loadBalancerBrokerLoadTargetStd=10\n")  # no shedding: only the split
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config)
        proposal = await steering.cycle(m.clock.advance(60_000))
        assert proposal is not None and [x.kind for x in proposal.moves] == ["split"]
        (call,) = fake.moves()
        assert call.path == f"/admin/v2/namespaces/{bundles[0]}/split" and call.body == ""
        assert call.query == {"unload": "false", "splitAlgorithmName": "range_equally_divide"}
        children = await m.pulsar_split(bundles[0], "b1", 0x40000000)
        await steering.cycle(m.clock.advance(500))
    (confirmed,) = await _events(m.log, ExecutionConfirmed)
    assert confirmed.children == children and confirmed.owner == "b1"


def test_pulsars_settings_are_read_as_broker_conf_keys_and_its_error_pages_as_one_line() -> None:
    settings = {  # as GET /admin/v2/brokers/configuration/runtime answers on Pulsar 4.0.7
        "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        "loadBalancerOverrideBrokerNicSpeedGbps": "Optional.empty",
        "supportedNamespaceBundleSplitAlgorithms": "[range_equally_divide, topic_count_equally_divide]",
        "loadBalancerServiceUnitTableViewSyncer": "None", "loadBalancerCPUResourceWeight": "0.0",
        "loadBalancerBandwithInResourceWeight": "1.0", "loadBalancerSheddingEnabled": "false",
        "loadBalancerBrokerOverloadedThresholdPercentage": "eighty", "webServicePort": "8080"}
    config, notes = load_balancer_config(settings, {"attachDriveMaxExecutionsPerMinute": "2"})
    assert config.extensible and config.load_balancer_load_shedding_strategy == "TransferShedder"
    assert config.supported_namespace_bundle_split_algorithms == ("range_equally_divide", "topic_count_equally_divide")
    assert config.load_balancer_cpu_resource_weight == 0.0 and config.attach_drive_max_executions_per_minute == 2
    assert any("loadBalancerBrokerOverloadedThresholdPercentage='eighty'" in n for n in notes)
    assert any("runs TransferShedder" in n for n in notes)
    page = ("\n --- An unexpected error occurred in the server ---\n\nMessage: Namespace bundle: t/n/0x0_0x1 "
            "own by b1, cannot be transfer to same broker.\n\nStacktrace:\n\njava.lang.IllegalArgumentException")
    assert _reason(page) == "Namespace bundle: t/n/0x0_0x1 own by b1, cannot be transfer to same broker."
    assert _reason('{"reason": "Not allowed"}') == "Not allowed"


def test_the_shipped_one_host_settings_choose_a_strategy_that_reads_rates() -> None:
    conf = Path(__file__).resolve().parents[2] / "conf" / "attach-one-host.conf"
    config = LoadBalancerConfig.from_broker_conf(conf.read_text())
    assert config.load_balancer_load_shedding_strategy == "UniformLoadShedder"
    assert config.attach_drive_max_executions_per_cycle == 1 and config.attach_decision_interval_seconds == 10
