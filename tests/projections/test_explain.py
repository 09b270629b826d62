"""`lbctl explain BUNDLE` and projections.explain: a bundle's moves from the log, with the numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from balancer.decisions import Decision, Reason
from events.catalog import BundleOwned, TransferPrepared, UnloadRequested
from events.log.local import LocalEventLog
from lbctl.main import main
from projections.explain import moves_of

BUNDLE = "t/a/0x00000000_0x80000000"
OTHER = "t/a/0x80000000_0xffffffff"


def _decision(src: str, dst: str, gain: float) -> dict[str, object]:
    decision = Decision(BUNDLE, src, dst, reason=Reason.UNDERLOADED, strategy="PlannedTransferShedder",
                        inputs={"gain": gain, "bundle_load": 2.5e6, "destination_warming": False})
    return decision.to_dict()


async def _write(directory: Path) -> None:
    log = LocalEventLog(directory)
    try:
        first = _decision("b1", "b2", 0.25)
        await log.append("t/a", [
            UnloadRequested(bundle=BUNDLE, src="b1", reason="Underloaded", decision=first),
            TransferPrepared(bundle=BUNDLE, src="b1", dst="b2", reason="Underloaded", decision=first),
            BundleOwned(bundle=BUNDLE, owner="b2", src="b1"),
            TransferPrepared(bundle=OTHER, src="b1", dst="b3", reason="Overloaded", decision={}),
            TransferPrepared(bundle=BUNDLE, src="b2", dst="b3", reason="Overloaded",
                             decision=_decision("b2", "b3", 0.125)),
            UnloadRequested(bundle=BUNDLE, src="b3", reason="Admin"),
        ], epoch=1)
    finally:
        await log.close()


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    asyncio.run(_write(tmp_path / "log"))
    return tmp_path / "log"


def test_every_move_once_in_log_order_with_its_decision(log_dir: Path) -> None:
    async def read() -> list[object]:
        log = LocalEventLog(log_dir)
        try:
            await log.start()
            return list((await log.read()).records)
        finally:
            await log.close()
    moves = moves_of(BUNDLE, asyncio.run(read()))  # type: ignore[arg-type]
    assert [(m.event, m.src, m.dst) for m in moves] == [
        ("UnloadRequested", "b1", "b2"), ("TransferPrepared", "b2", "b3"), ("UnloadRequested", "b3", None)]
    assert moves[0].decision["inputs"]["gain"] == 0.25 and moves[2].decision == {}


def test_cli_prints_the_inputs_and_scores(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", BUNDLE, "--log-dir", str(log_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{BUNDLE}: 3 move(s)")
    assert "b1 -> b2" in out and "PlannedTransferShedder" in out and "gain = 0.25" in out
    assert "b3 -> (released, no destination)" in out and "None" not in out and "{" not in out
    assert main(["explain", BUNDLE, "--log-dir", str(log_dir), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["dst"] for x in lines] == ["b2", "b3", None]


def test_state_dir_default_and_a_bundle_that_never_moved(tmp_path: Path, log_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "t/a/0x00000000_0x00000001", "--state-dir", str(log_dir.parent)]) == 2
    assert "in no record of the log" in capsys.readouterr().err  # a bundle that never existed
    assert main(["explain", BUNDLE, "--log-dir", str(tmp_path / "nowhere")]) == 2
