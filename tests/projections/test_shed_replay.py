"""The leader's recorded shedding runs, replayed over its own log (what-if's "as recorded"):
recordings of the live system (``lbctl run --host inproc``) are reproduced, run by run, for
every strategy; moves no shedding run made are counted, not dropped; a mismatch is reported."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from balancer.config import LoadBalancerConfig
from events.envelope import Envelope
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.main import main
from projections.shed_replay import align, recorded_runs, run_time

CONF = Path(__file__).resolve().parents[2] / "conf" / "broker.conf"


def _record(tmp_path: Path, conf: str, minutes: int = 40) -> tuple[LoadBalancerConfig, list[Record]]:
    (tmp_path / "broker.conf").write_text(conf)
    state = tmp_path / "state"
    assert main(["run", "--host", "inproc", "--conf", str(tmp_path / "broker.conf"), "--plain",
                 "--topics", "800", "--bundles", "8", "--minutes", str(minutes), "--speed", "0",
                 "--seed", "3", "--keep", "--state-dir", str(state)]) == 0

    async def read() -> list[Record]:
        async with LocalEventLog(state / "log", fsync=False) as log:
            return list((await log.read()).records)

    return LoadBalancerConfig.from_broker_conf(conf), asyncio.run(read())


@pytest.mark.parametrize("conf", [
    CONF.read_text(),  # ThresholdShedder, auto-split on: split children are unloaded too
    "loadBalancerLoadSheddingStrategy=OverloadShedder\n",
    "loadBalancerLoadSheddingStrategy=UniformLoadShedder\n",
    "loadManagerClassName=ExtensibleLoadManagerImpl\nloadBalancerLoadSheddingStrategy=TransferShedder\n",
], ids=["threshold", "overload", "uniform", "transfer"])
def test_a_live_recording_is_reproduced_run_by_run(conf: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config, records = _record(tmp_path, conf)
    capsys.readouterr()
    strategy = config.load_balancer_load_shedding_strategy
    runs = recorded_runs(_pairs(records), strategy)
    assert len(runs.runs) >= 35  # one run a minute, every one of them in the log
    result = align(records, runs, config)
    assert result.decisions >= 5, result.decisions
    assert result.reproduced >= 0.95, [r for r in result.runs if r.missed]
    # Skipped runs are replayed too, with the same reason.
    skipped = [r for r in result.runs if r.recorded_skip is not None and not r.recorded]
    assert skipped and all(r.replayed_skip == r.recorded_skip for r in skipped)
    # Every recorded move is either one of the strategy's decisions or counted by its reason.
    moves = [e for _, _, e in records if e.type in ("UnloadRequested", "TransferPrepared")]
    assert result.decisions + sum(result.unmodelled.values()) == len(moves)
    if not config.extensible:
        assert result.unmodelled.get("split", 0) > 0  # auto-split children: no shedding run made them


def test_a_recorded_decision_the_replay_does_not_make_is_reported(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config, records = _record(tmp_path, CONF.read_text(), minutes=30)
    capsys.readouterr()
    offset, moved = next((o, e) for _, o, e in records if e.type == "TransferPrepared"
                         and (e.payload.get("decision") or {}).get("strategy") == "ThresholdShedder")
    # The leader stamps each decision with its run's time.
    assert run_time(moved) == moved.payload["decision"]["run_ms"] <= moved.ts_ms
    forged = moved._replace(payload={**moved.payload, "bundle": "public/default/0x00000000_0x00000001"})
    tampered = [r._replace(envelope=forged) if r.offset == offset else r for r in records]
    result = align(tampered, recorded_runs(_pairs(tampered), "ThresholdShedder"), config)
    (run,) = [r for r in result.runs if r.missed]
    assert run.now_ms == run_time(moved) and run.missed[0].bundle.endswith("0x00000000_0x00000001")
    assert moved.payload["bundle"] in {d.bundle for d in run.replayed}
    assert result.matched == result.decisions - 1


def test_a_run_is_replayed_over_what_the_leader_had_folded_not_what_was_stamped_before_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # On Ray/Kafka the leader folds records some time after they are stamped, partition by
    # partition. Here a record stamped just before a run sits in a partition the leader had not
    # read yet: the source of the run's first move leaves. The leader never saw it; the replay
    # must not either.
    config, records = _record(tmp_path, CONF.read_text(), minutes=30)
    capsys.readouterr()
    moved = next(e for _, _, e in records if e.type == "TransferPrepared"
                 and (e.payload.get("decision") or {}).get("strategy") == "ThresholdShedder")
    decision = moved.payload["decision"]
    folded = {int(p): o for p, o in decision["folded"].items()}
    assert folded == {0: max(r.offset for r in records if r.envelope.ts_ms < decision["run_ms"])}
    src = moved.payload["src"]
    late = Envelope("late", "BrokerLeft", 2, src, 10_000, moved.epoch, decision["run_ms"] - 1, None, None,
                    {"broker_id": src, "reason": "graceful"})
    lagging = [*records, Record(1, 0, late)]
    runs = recorded_runs(_pairs(lagging), "ThresholdShedder")
    assert align(lagging, runs, config).reproduced == 1.0
    # Without the stamps (a log of older code), the run's time is all the replay has to go by.
    for run in runs.runs:
        run.folded = None
    result = align(lagging, runs, config)
    missed = next(r for r in result.runs if r.missed)  # and later runs of that source
    assert missed.now_ms == decision["run_ms"] and src in {m.source for m in missed.missed}


def _pairs(records: list[Record]) -> list[tuple[int, Envelope]]:
    return [(r.offset, r.envelope) for r in records]
