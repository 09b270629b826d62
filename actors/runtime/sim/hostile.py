"""Hostile faults of the simulator: a corrupt record, a forged event, a zombie writer.

Invariants:
- drawn from their own ``Random(f"{seed}:hostile")``, so the plans of seeds run before these
  faults existed are unchanged (only these are added); the forgeries under the right key (an
  impostor of the writer, unsigned or signed by an identity of the wrong role, another root's, a
  deposed leader) from ``Random(f"{seed}:impostor")``, for the same reason;
- a corrupt or forged record is written as a hostile process would, straight into the log
  (``append_raw``: well framed, next seqs, any key or epoch); a zombie writes through the normal
  ``append`` at an epoch older than the one the log holds for its key;
- what each must come to is recorded on the host (``HostileLog``) for the checker: a corrupt
  record must come back as a dead letter at its offset; a forged record must be refused by the
  fold (an anomaly at its offset), changing no view; a zombie's append must be refused. Those
  anomalies (and the gap a refused forgery leaves in its key's seqs) are expected; any other
  anomaly is still a violation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING, Any

import msgpack

from actors.runtime.sim.host import Fault
from actors.runtime.tickets import run_sync
from balancer.bundles import namespace_of
from balancer.errors import WriterFenced
from events.catalog import (
    CLUSTER_KEY,
    LEADER_KEY,
    BrokerLeft,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    FailureDomainSet,
    LeaderElected,
    Message,
)
from events.codec import encode
from events.envelope import Stamper, seal
from events.signing import Root

if TYPE_CHECKING:
    from actors.runtime.sim.host import SimHost

CORRUPT = ("garbage", "string_epoch", "bundles_not_maps", "huge_seq", "huge_epoch")
FORGED = ("force_from_broker_key", "unelected_epoch", "broker_url", "election_elsewhere")
IMPOSTORS = ("move", "move_by_broker", "move_by_rogue_shard", "move_by_deposed_leader", "register_owner",
             "register_owner_by_broker", "elect", "elect_by_broker", "elect_jump_by_candidate", "broker_left",
             "expire_by_broker", "failure_domain", "failure_domain_by_broker")
"""Forgeries under the very key, seq and epoch the writer would use: only who wrote them is
wrong (unsigned, or signed by an identity whose role does not write them)."""
HUGE = 2**64 - 1


@dataclass
class HostileLog:
    """What the hostile faults wrote, and what went wrong with them (for the checker)."""

    offsets: set[int] = field(default_factory=set)  # records the fold must refuse
    keys: set[str] = field(default_factory=set)  # keys whose seqs a refused forgery took
    dead: set[int] = field(default_factory=set)  # offsets that must be dead letters
    failures: list[str] = field(default_factory=list)


def hostile_plan(rng: Random, steps: int) -> list[Fault]:
    """A few of each kind, spread over the noisy part of the run."""
    out: list[Fault] = []
    for step in range(20, steps):
        roll = rng.random()
        if roll < 0.006:
            out.append(Fault(step, "corrupt", "", (rng.choice(CORRUPT), rng.randrange(1 << 30))))
        elif roll < 0.012:
            out.append(Fault(step, "forge", "", (rng.choice(FORGED), rng.randrange(1 << 30))))
        elif roll < 0.016:
            out.append(Fault(step, "zombie", "", rng.randrange(1 << 30)))
    return out


def impostor_plan(rng: Random, steps: int) -> list[Fault]:
    """A few forgeries under the right keys, spread over the noisy part of the run."""
    return [Fault(step, "impostor", "", (rng.choice(IMPOSTORS), rng.randrange(1 << 30)))
            for step in range(20, steps) if rng.random() < 0.01]


def _hostile(host: SimHost) -> HostileLog:
    found = getattr(host, "hostile", None)
    if found is None:
        found = HostileLog()
        host.hostile = found  # type: ignore[attr-defined]
    return found


def _raw(kind: str, key: str, seq: int, epoch: int, payload: dict[str, Any]) -> bytes:
    fields = [f"hostile-{kind}-{key}-{seq}", kind, 1, key, seq, epoch, 0, None, None, payload]
    data: bytes = msgpack.packb(fields, use_bin_type=True)
    return data


def _pick(items: list[str], pick: int) -> str:
    return sorted(items)[pick % len(items)]


def _write(host: SimHost, key: str, values: list[bytes]) -> int:
    offset = run_sync(host.log.end_offsets()).get(0, 0)
    run_sync(host.log.append_raw(key, values, ts_ms=host.now_ms))
    host._ingest()
    host._schedule_pump()
    return offset


def fire_corrupt(host: SimHost, fault: Fault) -> bool:
    variant, pick = fault.value
    namespaces = sorted(host.view.namespaces)
    brokers = sorted(host.client.brokers)
    if not namespaces or not brokers:
        return False
    ns, broker = _pick(namespaces, pick), _pick(brokers, pick)
    bundle = f"{ns}/0x00000000_0x10000000"
    raw = {
        "garbage": bytes(Random(pick).randbytes(64)),
        "string_epoch": _raw("LeaderElected", LEADER_KEY, 10**6, host.client.epoch,
                             {"leader_id": "x", "epoch": "oops"}),
        "bundles_not_maps": _raw("LoadReported", broker, 10**6, host.client.epoch,
                                 {"broker_id": broker, "broker_load": {}, "bundles": ["x"]}),
        "huge_seq": _raw("BundleOwned", ns, HUGE, host.client.epoch, {"bundle": bundle, "owner": broker}),
        "huge_epoch": _raw("BundleOwned", ns, 10**6, HUGE, {"bundle": bundle, "owner": broker}),
    }[variant]
    key = {"string_epoch": LEADER_KEY, "bundles_not_maps": broker}.get(variant, ns)
    offset = _write(host, key, [raw])
    letters = {letter.offset for letter in getattr(host, "dead_letters", [])}
    if offset not in letters:
        _hostile(host).failures.append(f"corrupt {variant} at #{offset} was not a dead letter")
    _hostile(host).dead.add(offset)
    return True


def _forgery(host: SimHost, variant: str, pick: int) -> tuple[str, int, list[Message]] | None:
    namespaces = sorted(host.view.namespaces)
    brokers = sorted(host.client.brokers)
    owned = sorted(host.view.owners().items())
    if not namespaces or len(brokers) < 2 or not owned:
        return None
    bundle, owner = owned[pick % len(owned)]
    thief = _pick([b for b in brokers if b != owner], pick)
    ns, epoch = namespace_of(bundle), host.client.epoch
    take: list[Message] = [BundleAssigned(bundle=bundle, dst=thief, src=owner, reason="admin", force=True),
                           BundleOwned(bundle=bundle, owner=thief, src=owner)]
    table: dict[str, tuple[str, int, list[Message]]] = {
        "force_from_broker_key": (thief, epoch, take),
        "unelected_epoch": (ns, epoch + 3, take),
        "broker_url": (thief, epoch, [BrokerRegistered(broker_id=owner, url="pulsar://evil:6650")]),
        "election_elsewhere": (thief, epoch + 3, [LeaderElected(leader_id="evil", epoch=epoch + 3)]),
    }
    return table[variant]


def fire_forge(host: SimHost, fault: Fault) -> bool:
    variant, pick = fault.value
    forged = _forgery(host, variant, int(pick))
    if forged is None:
        return False
    key, epoch, messages = forged
    seq, _ = run_sync(host.log.head(key))
    values = [encode(seal(m, key=key, seq=seq + i, epoch=epoch, clock_ms=lambda: host.now_ms,
                          new_id=lambda: f"forged-{host.now_ms}"))
              for i, m in enumerate(messages, start=1)]
    offset = _write(host, key, values)
    hostile = _hostile(host)
    hostile.offsets.update(range(offset, offset + len(values)))
    hostile.keys.add(key)
    return True


def fire_zombie(host: SimHost, fault: Fault) -> bool:
    """An old incarnation of a namespace shard wakes up and writes at its old epoch."""
    pick = int(fault.value)
    namespaces = sorted(host.view.namespaces)
    owned = sorted(host.view.owners().items())
    brokers = sorted(host.client.brokers)
    if not namespaces or not owned or len(brokers) < 2:
        return False
    bundle, owner = owned[pick % len(owned)]
    ns = namespace_of(bundle)
    _, newest = run_sync(host.log.head(ns))
    if newest < 2:
        return False
    thief = _pick([b for b in brokers if b != owner], pick)
    try:
        run_sync(host.log.append(ns, [BundleAssigned(bundle=bundle, dst=thief, src=owner, force=True,
                                                     reason="admin")], epoch=newest - 1))
    except WriterFenced:
        return True
    _hostile(host).failures.append(f"a zombie of {ns} at epoch {newest - 1} wrote after epoch {newest}")
    host._ingest()
    return True


def _impostor(host: SimHost, variant: str, pick: int) -> tuple[str, int, list[Message], str | None] | None:
    """(key, epoch, messages, signer) of one forgery under the right key; signer: None unsigned,
    ``rogue:<name>`` an identity of another root, else an identity of this cluster's root."""
    namespaces, brokers = sorted(host.view.namespaces), sorted(host.client.brokers)
    owned = sorted(host.view.owners().items())
    if not namespaces or len(brokers) < 2 or not owned:
        return None
    bundle, owner = owned[pick % len(owned)]
    thief = _pick([b for b in brokers if b != owner], pick)
    ns, epoch = namespace_of(bundle), host.client.epoch
    candidate = host.client.leader_id or "leader"
    move: list[Message] = [BundleAssigned(bundle=bundle, dst=thief, src=owner, reason="admin", force=True),
                           BundleOwned(bundle=bundle, owner=thief, src=owner)]
    shard = f"namespace:0/{host.settings.namespace_shards}"
    domain: list[Message] = [FailureDomainSet(domain="evil", brokers=[thief])]
    table: dict[str, tuple[str, int, list[Message], str | None]] = {
        "move": (ns, epoch, move, None),
        "move_by_broker": (ns, epoch, move, f"broker:{thief}"),
        "move_by_rogue_shard": (ns, epoch, move, f"rogue:{shard}"),
        "move_by_deposed_leader": (ns, epoch - 1, move, f"leader:{candidate}"),
        "register_owner": (owner, epoch, [BrokerRegistered(broker_id=owner, url="pulsar://evil:6650")], None),
        "register_owner_by_broker": (owner, epoch, [BrokerRegistered(broker_id=owner, url="pulsar://evil:6650")],
                                     f"broker:{thief}"),
        "elect": (LEADER_KEY, epoch + 1, [LeaderElected(leader_id="evil", epoch=epoch + 1)], None),
        "elect_by_broker": (LEADER_KEY, epoch + 1, [LeaderElected(leader_id=thief, epoch=epoch + 1)],
                            f"broker:{thief}"),
        "elect_jump_by_candidate": (LEADER_KEY, epoch + 7, [LeaderElected(leader_id=candidate, epoch=epoch + 7)],
                                    f"leader:{candidate}"),
        "broker_left": (owner, epoch, [BrokerLeft(broker_id=owner, reason="expired")], None),
        "expire_by_broker": (owner, epoch, [BrokerLeft(broker_id=owner, reason="expired")], f"broker:{thief}"),
        "failure_domain": (CLUSTER_KEY, epoch, domain, None),
        "failure_domain_by_broker": (CLUSTER_KEY, epoch, domain, f"broker:{thief}"),
    }
    return table[variant]


def fire_impostor(host: SimHost, fault: Fault) -> bool:
    """Write one forgery under the right key, with its next seqs, as the impostor would."""
    variant, pick = fault.value
    forged = _impostor(host, variant, int(pick))
    if forged is None or forged[1] < 1:
        return False
    key, epoch, messages, signer = forged
    stamper = Stamper(clock_ms=lambda: host.now_ms, new_id=lambda: f"impostor-{host.now_ms}")
    if signer is not None:
        rogue, _, name = signer.partition("rogue:")
        stamper.signer = Root(bytes(32)).issue(name) if not rogue and name else host.keyring.identity(signer)
    seq, _ = run_sync(host.log.head(key))
    envelopes = [stamper.seal(m, key=key, seq=seq + i, epoch=epoch) for i, m in enumerate(messages, start=1)]
    _, values = stamper.sign(envelopes, [encode(e) for e in envelopes])
    offset = _write(host, key, list(values))
    hostile = _hostile(host)
    hostile.offsets.update(range(offset, offset + len(values)))
    hostile.keys.add(key)
    return True
