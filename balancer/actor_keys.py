"""The broker.conf keys of the live system's timers (``actors.settings.ActorSettings``): names,
parsers and meanings, without the actors.

Invariants: a key is Pulsar's where Pulsar has one with the same meaning (the metadata session's
``metadataStoreSessionTimeoutMillis``), else ``bundleBalancer...``; each names one attribute of
``ActorSettings``, whose default is the key's (the actors own the value, ``actors.conf`` reads
it); ``LoadBalancerConfig`` accepts these keys as keys of another component of this project,
neither refused nor counted as ignored. Pure data: no I/O, no import of the actors.
"""

from __future__ import annotations

from dataclasses import dataclass

from balancer.config_values import POS_I, Parser


@dataclass(frozen=True, slots=True)
class ActorKey:
    """One broker.conf key of the actors: its name, the ``ActorSettings`` attribute it sets,
    its parser and its one-line meaning."""

    name: str
    attr: str
    parse: Parser
    doc: str


ACTOR_KEYS: tuple[ActorKey, ...] = (
    ActorKey("metadataStoreSessionTimeoutMillis", "session_timeout_ms", POS_I,
             "ms without a load report before the leader expires a broker (Pulsar's metadata session)"),
    ActorKey("bundleBalancerHeartbeatMillis", "heartbeat_ms", POS_I,
             "ms between a broker's load reports at most, changed or not (below the session timeout)"),
    ActorKey("bundleBalancerRetryMillis", "retry_ms", POS_I,
             "ms before an unanswered confirmation, registration or placement is sent again"),
    ActorKey("bundleBalancerSweepMillis", "sweep_ms", POS_I,
             "ms between the leader's looks for orphaned, free-with-traffic and stuck bundles"),
    ActorKey("bundleBalancerDrainTimeoutMillis", "drain_timeout_ms", POS_I,
             "ms after which a draining broker leaves even if some bundles did not move"),
    ActorKey("bundleBalancerRetryBackoffMaxMillis", "retry_backoff_max_ms", POS_I,
             "ms a retry that keeps failing waits at most (doubling from the retry interval)"),
    ActorKey("bundleBalancerOrphanRetryMaxMillis", "orphan_retry_max_ms", POS_I,
             "ms the leader's reassignment of a dead broker's bundle waits at most between tries"),
    ActorKey("bundleBalancerConfirmBackoffFrom", "confirm_backoff_from", POS_I,
             "confirmations waiting on one broker from which it backs off their re-sends"),
    ActorKey("bundleBalancerLookupRetryMillis", "lookup_retry_ms", POS_I,
             "ms before a client looks up an unowned bundle of its topics again"),
    ActorKey("bundleBalancerNamespaceShards", "namespace_shards", POS_I,
             "namespace bodies; each writes the namespaces whose name hashes to its shard"),
    ActorKey("bundleBalancerCommandOutcomesKept", "outcomes_kept", POS_I,
             "command outcomes a writer remembers for idempotent repeats (the newest)"),
)
"""In the order ``ActorSettings`` declares its attributes (and the shipped broker.conf lists them)."""

ACTOR_KEY_NAMES: frozenset[str] = frozenset(key.name for key in ACTOR_KEYS)
