"""The invariants the simulator checks after every step, as one ``Checker``.

Invariants checked (each names itself in a ``Violation``):
- ``single_owner``: no two live brokers serve overlapping hash ranges of a namespace at once
  (each broker's own view of what it serves);
- ``tiling``: the bundles of every namespace tile [0, 0xffffffff] without gap or overlap, and no
  active ownership record names a range outside its namespace's layout;
- ``liveness``: no live broker is expired: a ``BrokerLeft(expired)`` never names a broker whose
  body is up and which was heard from (a report or registration in the log) within the session
  timeout, counted in time the log was available (less ``slack_ms`` for the leader's ticks);
- ``expiry``: no bundle stays Owned by a dead broker (crashed, or not registered) for longer
  than the session timeout plus ``grace_ms`` while a leader leads and the log is up;
- ``lookup``: every lookup is answered (its topic's bundle Owned) within ``lookup_ms`` of calm
  (for a lookup, calm also waits for the last dropped command about its bundle);
- ``in_flight``: no record stays Assigning, Releasing or Splitting past the in-flight wait plus
  one monitor interval (behaviour §6.3: the monitor overrides it) plus ``grace_ms`` of calm
  (calm of that bundle: after the last dropped command about it);
- ``epochs``: no body's or the client's epoch goes back, LeaderElected epochs strictly rise in
  log order, and a key's envelope epochs never fall in log order;
- ``replay``: the client's view and every caught-up body's view equal a fold of the log, and that
  fold refuses nothing (no anomaly) but the hostile faults' records (compared whole every
  ``full_every`` checks, on the bundles the new records name between them);
- ``operator_hold`` (at the end): over the whole log, no shedding move started while an
  operator's pause held and no start exceeded the throttle's caps (``actors.runtime.sim.pauses``);
- ``drain_hold`` (at the end): over the whole log, no drained broker received a bundle while
  drained (``actors.runtime.sim.drains``); time-based checks count a drained broker as one
  that cannot take a bundle;
- ``forgery``: the fold of the log names every forged record (an anomaly at its offset) and
  equals a fold of the log without them (``honest``): who wrote a record decides, not its key.

"Calm" starts when the last thing that stops progress ended: a log outage, a leader's election
(a new leader gives every broker one session) or a namespace body's restart. Time-based checks
are suspended while no leader leads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

from actors.broker import BrokerBody
from actors.runtime.sim.approvals import approval_violation
from actors.runtime.sim.drains import DrainWatch, drain_violation
from actors.runtime.sim.host import SimHost
from actors.runtime.sim.hostile import HostileLog
from actors.runtime.sim.pauses import pause_violation
from actors.settings import broker_body_name
from balancer.bundles import HASH_MAX, BundleId
from balancer.ownership import AcceptMode, BundleState
from events.log.port import Record
from projections.ownership import OwnershipProjection
from projections.tracking import Anomaly

# Bundle names repeat all run long; parsing them once per process keeps the checks cheap.
_parse = lru_cache(maxsize=1 << 16)(BundleId.parse)


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    step: int
    now_ms: int
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} broken at step {self.step} (t={self.now_ms}): {self.detail}"


@dataclass(slots=True)
class Lookup:
    topic: str
    issued_ms: int
    retry_ms: int = 0


@dataclass(slots=True)
class Checker:
    host: SimHost
    grace_ms: int = 20_000
    lookup_ms: int = 60_000
    replay: OwnershipProjection = field(init=False)
    honest: OwnershipProjection = field(init=False)
    """A fold of every record but the hostile ones: what the log's legitimate writers wrote."""
    lookups: list[Lookup] = field(default_factory=list)
    down_since: dict[str, int] = field(default_factory=dict)
    """Broker id -> when it was last seen dead (crashed body or not registered)."""
    calm_from: int = 0
    slack_ms: int = 1_000
    heard: dict[str, int] = field(default_factory=dict)
    """Broker id -> the log time of its newest report or registration."""
    _epochs: dict[str, int] = field(default_factory=dict)
    _key_epochs: dict[str, int] = field(default_factory=dict)
    _elected: int = 0
    _offset: int = 0
    full_every: int = 1
    """Every how many checks each live view is compared whole with the fold of the log; the
    checks between compare the bundles their new records name, and the sizes (the scenario's
    ``full_check_every``: at 8,192 bundles and 50 brokers a whole compare of every view costs
    more than the step it checks). A divergence is caught at the next whole compare at the
    latest; ``final`` always compares whole."""
    _checks: int = 0

    drains: DrainWatch = field(init=False)

    def __post_init__(self) -> None:
        self.replay = OwnershipProjection(mode=AcceptMode.from_config(self.host.config))
        self.honest = OwnershipProjection(mode=AcceptMode.from_config(self.host.config))
        self.drains = DrainWatch(self.host)

    def disturbed(self) -> None:
        """Something that stops progress just happened (or ended): restart the calm clock."""
        self.calm_from = self.host.now_ms

    # -- the check ---------------------------------------------------------------------------
    def check(self, step: int) -> Violation | None:
        new = self.host.records[self._offset:]
        self._offset = len(self.host.records)
        checks = (self._epochs_ok(new), self._replay_ok(new), self._liveness(new), self._single_owner(),
                  self._tiling() if new else None,
                  self._expiry(), self._lookups(), self._in_flight())
        problem = next((c for c in checks if c is not None), None)
        return None if problem is None else Violation(problem[0], step, self.host.now_ms, problem[1])

    def _calm(self) -> int | None:
        """Since when progress was possible, or None while no leader leads or the log is down."""
        leader = self.host.leader()
        if leader is None or not self.host.log_available():
            return None
        since = getattr(leader, "leader_since", None) or self.host.now_ms
        return max(self.calm_from, since)

    def _unexpected(self, view: OwnershipProjection) -> list[Anomaly]:
        """Anomalies other than the refusals of the hostile faults (and the gaps they leave)."""
        hostile = self._hostile()
        return [a for a in view.anomalies if a.offset not in hostile.offsets
                and not (a.kind == "gap" and a.key in hostile.keys)]

    def _hostile(self) -> HostileLog:
        return getattr(self.host, "hostile", None) or HostileLog()

    def _epochs_ok(self, new: list[Record]) -> tuple[str, str] | None:
        hostile = self._hostile()
        if hostile.failures:
            return "hostile", hostile.failures[0]
        for record in new:
            envelope = record.envelope
            if record.offset in hostile.offsets:
                continue  # a forgery: the fold must refuse it (checked in _replay_ok)
            if envelope.epoch < self._key_epochs.get(envelope.key, 0):
                return "epochs", f"#{record.offset} {envelope.key} epoch {envelope.epoch} after " \
                                 f"{self._key_epochs[envelope.key]}"
            self._key_epochs[envelope.key] = envelope.epoch
            if envelope.type == "LeaderElected":
                epoch = int(envelope.payload["epoch"])
                if epoch <= self._elected:
                    return "epochs", f"#{record.offset} LeaderElected epoch {epoch} after {self._elected}"
                self._elected = epoch
        seen = [("client", self.host.client.epoch)]
        seen += [(name, int(getattr(body, "epoch", 0))) for name, body in sorted(self.host.bodies.items())]
        for name, epoch in seen:
            if epoch < self._epochs.get(name, 0):
                return "epochs", f"{name} went back from epoch {self._epochs[name]} to {epoch}"
            self._epochs[name] = epoch
        return None

    def _liveness(self, new: list[Record]) -> tuple[str, str] | None:
        limit = self.host.settings.session_timeout_ms - self.slack_ms
        for record in new:
            envelope = record.envelope
            if record.offset in self._hostile().offsets:
                continue  # a forgery: it expires no one (the fold refuses it)
            if envelope.type in ("LoadReported", "BrokerRegistered"):
                self.heard[envelope.key] = envelope.ts_ms
            if envelope.type != "BrokerLeft" or envelope.payload.get("reason") != "expired":
                continue
            body = self.host.bodies.get(broker_body_name(envelope.key))
            heard = self.heard.get(envelope.key)
            if not isinstance(body, BrokerBody) or body.stopped or heard is None:
                continue
            quiet = self.host.log_up_ms(heard, envelope.ts_ms)
            if quiet <= limit:
                return "liveness", f"#{record.offset} expired live {envelope.key}, heard from " \
                                   f"{envelope.ts_ms - heard} ms before ({quiet} ms of it with the log up)"
        return None

    def _replay_ok(self, new: list[Record]) -> tuple[str, str] | None:
        hostile = self._hostile()
        for record in new:
            applied = self.replay.apply(record.offset, record.envelope)
            if record.offset not in hostile.offsets:
                self.honest.apply(record.offset, record.envelope)
            elif applied:
                return "forgery", f"the fold applied the forged #{record.offset} {record.envelope.type}"
        if new and hostile.offsets:
            problem = self._forgeries_ok(hostile, new[0].offset)
            if problem is not None:
                return "forgery", problem
        unexpected = self._unexpected(self.replay)
        if unexpected:
            return "replay", f"the log holds an event its fold refuses: {unexpected[0]}"
        self._checks += 1
        named = None if self._checks % self.full_every == 0 else named_bundles(new)
        if not same_view(self.host.client.ownership, self.replay, named):
            return "replay", "the client's view differs from a fold of the log"
        end = len(self.host.records)
        for name, body in sorted(self.host.bodies.items()):
            caught_up = self.host._cursor.get(name) == end
            if caught_up and not same_view(body.ownership, self.replay, named):  # type: ignore[attr-defined]
                return "replay", f"{name}'s live view differs from a fold of the log"
        return None

    def _forgeries_ok(self, hostile: HostileLog, since: int) -> str | None:
        """Every forgery from ``since`` on is named, and the view is the honest writers' alone."""
        named = {a.offset for a in self.replay.anomalies if a.offset >= since}
        missed = sorted(o for o in hostile.offsets if o >= since and o not in named and o not in hostile.dead)
        if missed:
            return f"the forged #{missed[0]} was folded without an anomaly"
        replay, honest = self.replay, self.honest
        if not replay.state_equals(honest) or (replay.elected, replay.leaders) != (honest.elected, honest.leaders):
            return "the fold of the log differs from a fold of its legitimate records"
        return None

    def _single_owner(self) -> tuple[str, str] | None:
        spans: dict[str, list[tuple[int, int, str, str]]] = {}
        for body in self.host.bodies.values():
            if not isinstance(body, BrokerBody) or body.stopped:
                continue
            for bundle in body.owned():
                parsed = _parse(bundle)
                spans.setdefault(parsed.namespace, []).append(
                    (parsed.range.lower, parsed.range.upper, body.broker_id, bundle))
        for items in spans.values():
            items.sort()
            for (_, upper, broker, bundle), (lower, _, other, bundle2) in pairwise(items):
                if lower < upper and broker != other:
                    return "single_owner", f"{broker} serves {bundle} while {other} serves {bundle2}"
        return None

    def _tiling(self) -> tuple[str, str] | None:
        for name, info in sorted(self.replay.namespaces.items()):
            ranges = list(info.layout)
            edge = 0
            for hash_range in ranges:
                if hash_range.lower != edge:
                    return "tiling", f"{name}: {hash_range.name} starts at {hash_range.lower:#010x}, not {edge:#010x}"
                edge = hash_range.upper
            if edge != HASH_MAX:
                return "tiling", f"{name}: the bundles end at {edge:#010x}"
        for bundle, record in self.replay.records.items():
            if not record.state.active:
                continue
            parsed = _parse(bundle)
            layout = self.replay.namespaces.get(parsed.namespace)
            if layout is None or parsed.range not in layout.layout:
                return "tiling", f"{bundle} is {record.state} but not a bundle of its namespace"
        return None

    def _dead_brokers(self) -> set[str]:
        host, now = self.host, self.host.now_ms
        live = {b.broker_id for b in host.bodies.values() if isinstance(b, BrokerBody) and not b.stopped}
        dead = {r.dst for r in self.replay.records.values() if r.dst is not None} - (live & set(host.client.brokers))
        for broker in dead:
            self.down_since.setdefault(broker, now)
        for broker in set(self.down_since) - dead:
            del self.down_since[broker]
        return dead

    def _expiry(self) -> tuple[str, str] | None:
        dead = self._dead_brokers()
        calm = self._calm()
        if calm is None or not self._placeable():
            return None
        limit = self.host.settings.session_timeout_ms + self.grace_ms
        for bundle, record in sorted(self.replay.records.items()):
            if record.state is BundleState.OWNED and record.dst in dead:
                since = max(self.down_since[record.dst], calm, record.timestamp_ms)
                if self.host.now_ms - since > limit:
                    return "expiry", f"{bundle} is still Owned by dead {record.dst} " \
                                     f"{self.host.now_ms - since} ms after calm (limit {limit})"
        return None

    def _placeable(self) -> bool:
        """Some live, registered, non-draining broker an operator has not drained can take an orphan."""
        drained = self.drains.drained()
        return any(isinstance(b, BrokerBody) and b.registered and not b.stopped and b.draining_since is None
                   and b.broker_id not in drained for b in self.host.bodies.values())

    def _lookups(self) -> tuple[str, str] | None:
        view, now = self.host.client.ownership, self.host.now_ms
        self.lookups = [q for q in self.lookups if view.lookup(q.topic) is None]
        calm = self._calm()
        if calm is None or not self._placeable():
            return None
        for pending in self.lookups:
            bundle = view.bundle_of_topic(pending.topic)
            waited = now - max(pending.issued_ms, calm, self.host.lost.get(bundle, 0))
            if waited > self.lookup_ms:
                return "lookup", f"lookup of {pending.topic} unanswered for {waited} ms of calm"
        return None

    def _in_flight(self) -> tuple[str, str] | None:
        calm = self._calm()
        if calm is None or not self._placeable():
            return None
        config = self.host.config
        limit = (config.load_balancer_in_flight_service_unit_state_waiting_time_in_millis
                 + config.load_balancer_service_unit_state_monitor_interval_in_seconds * 1000 + self.grace_ms)
        for bundle, record in sorted(self.replay.records.items()):
            if record.state.in_flight:
                waited = self.host.now_ms - max(record.timestamp_ms, calm, self.host.lost.get(bundle, 0))
                if waited > limit:
                    return "in_flight", f"{bundle} {record.state} (dst={record.dst}, src={record.src}) " \
                                        f"for {waited} ms of calm (limit {limit})"
        return None

    def final(self, step: int) -> Violation | None:
        """After the settle phase: a full replay read back from the log equals the live fold."""
        fresh = self.host.replay()
        if not fresh.state_equals(self.replay) or self._unexpected(fresh):
            return Violation("replay", step, self.host.now_ms, "a full replay of the log differs from the live fold")
        held = pause_violation(self.host)
        if held is not None:
            return Violation("operator_hold", step, self.host.now_ms, held)
        received = drain_violation(self.host)
        if received is not None:
            return Violation("drain_hold", step, self.host.now_ms, received)
        unapproved = approval_violation(self.host)
        if unapproved is not None:
            return Violation("approvals", step, self.host.now_ms, unapproved)
        return None


def named_bundles(records: list[Record]) -> set[str]:
    """The bundles ``records`` name (a move's bundle, a split's parent and children, a cleanup's list)."""
    out: set[str] = set()
    for record in records:
        payload = record.envelope.payload
        for key in ("bundle", "parent"):
            if isinstance(payload.get(key), str):
                out.add(payload[key])
        for key in ("children", "bundles"):
            found = payload.get(key)
            if isinstance(found, list):
                out.update(b for b in found if isinstance(b, str))
    return out


def same_view(view: OwnershipProjection, fold: OwnershipProjection, named: set[str] | None) -> bool:
    """``view`` equals ``fold`` whole (``named`` None), or on the ``named`` bundles, the number of
    records, the brokers and the failure domains."""
    if named is None:
        return view.state_equals(fold)
    if len(view.records) != len(fold.records) or view.brokers != fold.brokers \
            or view.failure_domains != fold.failure_domains:
        return False
    return all(view.records.get(b) == fold.records.get(b) for b in named)
