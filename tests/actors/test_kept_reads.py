"""Read verbs on a kept in-process cluster answer from a fold of its log and start no body: any
number of them leave the log as it was (no new election, no broker registering again); a verb
that sends a command starts the cluster from its log and appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.main import main
from projections.ownership import OwnershipProjection

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
RUN = ["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "200", "--minutes", "1",
       "--speed", "0", "--keep"]


def _records(state: Path) -> list[Record]:
    from actors.runtime.tickets import run_sync

    log = LocalEventLog(state / "log", group_commit=False)
    try:
        return run_sync(log.read()).records
    finally:
        run_sync(log.close())


def _owned_topic(records: list[Record]) -> str:
    """A topic whose bundle is owned in the log: its lookup is a read."""
    view = OwnershipProjection()
    for record in records:
        view.apply(record.offset, record.envelope)
    return next(topic for topic in (f"persistent://public/default/t-{i}" for i in range(1000))
                if view.lookup(topic) is not None)


def _owned_range(state: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(["namespaces", "bundles", "public/default", "--state-dir", str(state)]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if " Owned " in line)
    return row[0], row[2]


def test_read_verbs_leave_the_log_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main([*RUN, "--state-dir", str(state)]) == 0
    before = _records(state)
    bundle, owner = _owned_range(state, capsys)
    reads = [["brokers", "list"], ["broker-stats", "load-report", owner],
             ["explain", f"public/default/{bundle}"], ["topics", "lookup", _owned_topic(before)],
             ["namespaces", "bundles", "public/default"]]
    for _ in range(3):
        for verb in reads:
            assert main([*verb, "--state-dir", str(state)]) == 0, verb
    capsys.readouterr()
    assert len(_records(state)) == len(before)

    # A verb that sends a command starts the cluster from its log: a new leader, new records.
    assert main(["namespaces", "unload", "public/default", "-b", bundle, "--state-dir", str(state)]) == 0
    after = _records(state)
    assert len(after) > len(before)
    assert [r.envelope.type for r in after[len(before):]].count("LeaderElected") == 1
