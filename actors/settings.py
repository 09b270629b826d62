"""Timers of the live system that broker.conf does not name, and the log addresses of bodies.

Invariants:
- every duration is in milliseconds of the clock the host passes in (virtual or real), never
  read here; ``ActorSettings`` is immutable and the same value is given to every body of a host;
- a broker publishes a load report at least every ``heartbeat_ms`` (reports are the leader's
  liveness signal), and ``heartbeat_ms`` is below ``session_timeout_ms``, or a healthy broker
  would be expired;
- routing is a pure function of the command: a namespace key goes to the namespace shard that
  writes it; a lookup (``LookupBundle``), a drain request (``DrainBundle``),
  ``SetFailureDomain`` and the pause and resume of the balancer go to the leader.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from balancer.errors import ConfigError
from events.catalog import (
    Command,
    DrainBroker,
    DrainBundle,
    LookupBundle,
    PauseBalancer,
    ResumeBalancer,
    ReviewProposal,
    SetFailureDomain,
    UndrainBroker,
)

LEADER = "leader"
"""The routing address of whichever leader body currently leads."""
DRAIN_PREFIX = "drain:"


@dataclass(frozen=True, slots=True)
class ActorSettings:
    """Timers of brokers, the leader and clients (Pulsar's defaults where it has one)."""

    session_timeout_ms: int = 30_000
    """No report for this long: the leader expires the broker (Pulsar's metadata session, 30 s)."""
    heartbeat_ms: int = 10_000
    """A broker reports at least this often even when its load did not change."""
    retry_ms: int = 2_000
    """A confirmation, registration or placement request not answered by now is sent again."""
    sweep_ms: int = 1_000
    """The leader looks for orphaned, free-with-traffic and stuck bundles this often."""
    drain_timeout_ms: int = 60_000
    """A draining broker leaves after this long even if some bundles did not move."""
    retry_backoff_max_ms: int = 16_000
    """A retry that keeps failing (a registration, the leader's expiry of one broker) waits
    ``retry_ms``, then twice as long each time, up to this (``backoff_ms``)."""
    orphan_retry_max_ms: int = 8_000
    """The leader's reassignment of a dead broker's bundle backs off from ``retry_ms`` up to
    this, not ``retry_backoff_max_ms``: those bundles must move within the session timeout and
    a few lost messages, and 16 s waits after three losses in a row let one stay with a dead
    broker 51 s past calm (``lbctl sim --seed 608009 --scenario scale_in``). Assignments for
    lookups keep the longer cap: in a storm, re-sends every 8 s were most of the calls."""
    confirm_backoff_from: int = 256
    """A broker with this many confirmations waiting (a lookup storm) sends each again after
    ``retry_ms``, then twice as long each time up to ``retry_backoff_max_ms``; with fewer, every
    ``retry_ms``: backing off a handover's few confirmations made unloads overrun the 30 s
    in-flight wait on a loaded machine (the secured live test's audit)."""
    lookup_retry_ms: int = 1_000
    """Clients look up an unowned bundle of theirs again after this long."""
    namespace_shards: int = 1
    """Namespace bodies: each writes the namespaces whose name hashes to its shard."""
    outcomes_kept: int = 100_000
    """Command outcomes a writer remembers for idempotent repeats (the newest; memory
    stays bounded over a long run). A repeat of an older command id is handled as new."""

    def __post_init__(self) -> None:
        if self.heartbeat_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat_ms {self.heartbeat_ms} must be below session_timeout_ms "
                f"{self.session_timeout_ms}, or healthy brokers expire", value=self.heartbeat_ms)
        if self.namespace_shards < 1:
            raise ConfigError(f"namespace_shards {self.namespace_shards} must be >= 1",
                              value=self.namespace_shards)


def backoff_ms(settings: ActorSettings, tries: int, cap_ms: int | None = None) -> int:
    """How long to wait before try ``tries + 1`` of something that failed ``tries`` times (up to
    ``cap_ms``, by default ``retry_backoff_max_ms``)."""
    cap = settings.retry_backoff_max_ms if cap_ms is None else cap_ms
    return min(settings.retry_ms << max(0, min(tries, 30)), max(settings.retry_ms, cap))


def namespace_shard(key: str, shards: int) -> int:
    """The shard writing a namespace key (stable across processes: CRC-32, not ``hash``)."""
    return zlib.crc32(key.encode("utf-8")) % shards if shards > 1 else 0


def namespace_body_name(shard: int) -> str:
    return f"ns:{shard}"


def broker_body_name(broker_id: str) -> str:
    return f"broker:{broker_id}"


def route(command: Command, shards: int = 1) -> str:
    """The body name that handles ``command`` (``LEADER`` for the current leader)."""
    if isinstance(command, SetFailureDomain | PauseBalancer | ResumeBalancer | DrainBroker | UndrainBroker
                  | ReviewProposal):
        return LEADER
    if isinstance(command, LookupBundle | DrainBundle):
        return LEADER  # the leader chooses the broker
    return namespace_body_name(namespace_shard(command.default_key(), shards))


def drain_request_id(broker_id: str, bundle: str, epoch: int, now_ms: int) -> str:
    """The command id of a draining broker's ``DrainBundle``: unique per broker, bundle, epoch
    and time (the broker's length-prefixed id first: broker ids and namespace names may hold ':')."""
    return f"{DRAIN_PREFIX}{len(broker_id)}:{broker_id}:{bundle}:e{epoch}:{now_ms}"


