"""Direct tests of the fixes the simulator led to (each also has its seed in test_seeds.py)."""

from __future__ import annotations

import pytest

from balancer.errors import StateConflict
from events.catalog import AssignBundle
from tests.unit.cluster_scenarios import assert_consistent, bundles, make_host, owner, place_all


def test_forced_orphan_reassignment_of_a_registered_owner_is_refused() -> None:
    # Seed 165 rolling_restart: the leader's cleanup of an expired broker was delivered after the
    # broker had re-registered and served its bundle again; the force moved it away while the
    # owner still served it (two owners). Re-registration cancels the cleanup (behaviour §6.3).
    host = make_host()
    place_all(host)
    bundle = bundles(host)[0]
    held_by = owner(host, bundle)
    other = next(b for b in sorted(host.client.brokers) if b != held_by)
    with pytest.raises(StateConflict, match="re-registration"):
        host.call(AssignBundle(command_id=host.command_id(), epoch=host.epoch, bundle=bundle,
                               dst=other, reason="orphan", force=True))
    assert owner(host, bundle) == held_by
    assert_consistent(host)


def test_forced_reassignment_of_an_unregistered_owner_still_goes_ahead() -> None:
    host = make_host()
    place_all(host)
    bundle = bundles(host)[0]
    held_by = owner(host, bundle)
    host.crash(f"broker:{held_by}")
    assert host.run_until(lambda: held_by not in host.client.brokers, 60_000)
    assert host.run_until(lambda: host.view.owner(bundle) not in (None, held_by), 30_000)
    assert_consistent(host)
