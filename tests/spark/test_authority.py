"""The Spark replays decide who wrote each record as lbctl's reader does: on every attack log of
``tests/integration/test_authority.py``, the records the Spark audit names ``forged`` or
``unauthorized`` are the ones lbctl's fold names, they are left out of its ownership, and a
reader pinned to the cluster's root refuses a log founded under another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from balancer.errors import ForeignCluster
from events.signing import Root
from spark_replay.audit import audit, timeline
from spark_replay.authority import check_authority, entitled
from spark_replay.sources import decoded_once, read_local
from tests.integration.test_authority import BUNDLE, SIGNED_ATTACKS, fold, signed_attack

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_every_signed_attack_is_named_by_the_spark_reader_as_by_lbctl(spark: Any, tmp_path: Path) -> None:
    for i, (case, (signer, key, epoch, messages, kind)) in enumerate(SIGNED_ATTACKS.items()):
        records, at = asyncio.run(signed_attack(tmp_path / str(i), signer, key, epoch, messages))
        lbctl, _ = fold(records)
        found = check_authority(read_local(spark, tmp_path / str(i) / "log", raw=True))
        named = {(r.offset, r.kind) for r in found.refused}
        assert named == {(a.offset, a.kind) for a in lbctl.anomalies}, case
        assert named == {(o, kind) for o in range(at, at + len(messages))}, case


def test_the_spark_audit_names_a_forged_move_and_keeps_the_legitimate_owner(spark: Any, tmp_path: Path) -> None:
    """Before: the audit counted a forged forced move (unsigned, under the namespace's key at
    the elected epoch and the next seqs): its timeline gave the bundle to broker-2, 0 violations
    about it, while ``lbctl log anomalies`` named both records ``forged``."""
    signer, key, epoch, messages, _ = SIGNED_ATTACKS["force move, unsigned"]
    records, at = asyncio.run(signed_attack(tmp_path, signer, key, epoch, messages))
    df = decoded_once(read_local(spark, tmp_path / "log", raw=True))
    found = check_authority(df)
    report = audit(df, trust=found)
    assert [(v.check, v.offset) for v in report.of("forged")] == [("forged", at), ("forged", at + 1)]
    assert "forged" in report.checks and "unauthorized" in report.checks
    owners = [(r["owner"], r["to_offset"])
              for r in timeline(entitled(df, found)).where(f"bundle = '{BUNDLE}'").collect()]
    assert owners == [("broker-1", None)]
    lbctl, _ = fold(records)
    assert lbctl.owner(BUNDLE) == "broker-1"
    # A decoded read (no stored bytes) cannot verify: the audit says it did not check.
    assert "forged" not in audit(read_local(spark, tmp_path / "log")).checks
    # A reader pinned to another cluster's root refuses the log as a whole, naming both keys.
    with pytest.raises(ForeignCluster, match="founded under root key"):
        check_authority(df, root=Root().public, source=str(tmp_path / "log"))
    assert check_authority(df, root=found.root).refused == found.refused
