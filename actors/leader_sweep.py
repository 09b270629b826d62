"""The leader's sweeps, as a part of ``LeaderBody``: brokers that fell silent, the bundles they
left behind, Free bundles that still carry traffic and moves stuck in flight.

Invariants:
- silence is counted only in time the log was available (``LogOutages``), and a new leader gives
  every broker one session; an expiry is a compare-and-set on the broker's key at the last seq
  this leader folded, tried again later and later (backoff) when refused;
- an orphan (an active record naming a broker that left, a Releasing or Splitting one whose
  source left, a record of a departed session) is forced to a live broker, a transfer whose
  source died on to its destination if that one lives; largest load first when the shedder
  brings its own placement;
- a Free bundle is placed again only while its last report (or its parent's) shows load; a
  record in flight past the in-flight wait is forced onward, to its destination if it lives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.effects import NOTHING, Effects, combine, unanswered
from actors.leader_view import has_traffic
from actors.settings import ActorSettings, backoff_ms
from balancer.config import LoadBalancerConfig
from balancer.liveness import LogOutages
from balancer.ownership import IN_FLIGHT, BundleState, OwnershipRecord, in_flight_expired
from balancer.placement.strategies import BringsPlacement
from balancer.shedding.run import SheddingRun
from events.catalog import BrokerLeft, BrokerRegistered
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection
from projections.ownership_index import OwnershipIndex


class Sweeping:
    """The sweep half of the leader (mixed into ``LeaderBody`` after ``Follower``, whose
    methods come first)."""

    config: LoadBalancerConfig
    settings: ActorSettings
    ownership: OwnershipProjection
    by_broker: OwnershipIndex
    brokers: dict[str, BrokerRegistered]
    load: LoadProjection
    shedding: SheddingRun
    outages: LogOutages
    parents: dict[str, str]
    leader_since: int | None
    _expiries: dict[str, tuple[int, int]]

    @property
    def my_epoch(self) -> int:
        raise NotImplementedError

    def key_seq(self, key: str) -> int:
        raise NotImplementedError

    def is_void(self, bundle: str, record: OwnershipRecord) -> bool:
        raise NotImplementedError

    def void_bundles(self) -> list[str]:
        raise NotImplementedError

    def _place(self, bundle: str, record: OwnershipRecord | None, now_ms: int, *, reason: str,
               force: bool = False, dst: str | None = None, exclude: tuple[str, ...] = ()) -> Effects | None:
        raise NotImplementedError

    def _expire(self, now_ms: int) -> Effects:
        """``BrokerLeft(expired)`` for each broker silent for a session timeout of log time.

        Silence is counted only while the log was available (``LogOutages``; none while it is
        down), and each expiry is a compare-and-set on the broker's key at the last seq this
        leader folded: a report it has not folded yet (a lagging subscription) refuses it."""
        timeout = self.settings.session_timeout_ms
        gone = [b for b in sorted(self.brokers)
                if self.outages.available_ms(self._last_seen(b), now_ms) > timeout
                and self._expiries.get(b, (0, 0))[1] <= now_ms]
        for b in gone:  # a refused expiry is tried again later and later (backoff)
            tries = self._expiries.get(b, (0, 0))[0]
            self._expiries[b] = (tries + 1, now_ms + backoff_ms(self.settings, tries))
        return combine(Effects(append=((b, BrokerLeft(broker_id=b, reason="expired")),), epoch=self.my_epoch,
                               expected_seq={b: self.key_seq(b)}) for b in gone)

    def _last_seen(self, broker: str) -> int:
        info = self.load.brokers.get(broker)
        seen = info.last_seen_ms if info is not None else 0
        # A leader that just took over gives every broker one session to be heard from.
        return max(seen, self.leader_since or 0)

    def _orphans(self, now_ms: int) -> Effects:
        live = self.brokers
        parts: list[Effects] = []
        for bundle, record in self._orphan_order(live):
            dead_dst = record.dst is not None and record.dst not in live and record.state.active
            dead_src = (record.src is not None and record.src not in live
                        and record.state in (BundleState.RELEASING, BundleState.SPLITTING))
            # A record of a departed session is an orphan even once its broker registers again.
            if not (dead_dst or dead_src or (record.state.active and self.is_void(bundle, record))):
                continue
            # A transfer whose source died goes on to its destination if that one lives.
            dst = record.dst if (record.state is BundleState.RELEASING and record.dst in live) else None
            parts.append(self._place(bundle, record, now_ms, reason="orphan", force=True, dst=dst) or NOTHING)
        return unanswered(combine(parts))

    def _orphan_order(self, live: Mapping[str, Any]) -> list[tuple[str, OwnershipRecord]]:
        """Records naming a broker not in ``live`` and void records (the only ones that can be
        orphans), by id; largest load first when the shedder brings its own placement (it fills
        brokers by headroom, so the small orphans even out the large ones), as the simulator does."""
        dead = {b for broker in self.by_broker.brokers() if broker not in live
                for b in self.by_broker.involving(broker)}
        dead.update(self.void_bundles())
        records = sorted((b, self.ownership.records[b]) for b in dead)
        if isinstance(self.shedding.strategy, BringsPlacement):
            records.sort(key=lambda item: -self._throughput(item[0]))  # stable: ties by id
        return records

    def _throughput(self, bundle: str) -> float:
        data = self.load.bundles.get(bundle)
        return 0.0 if data is None else data.stats.msg_throughput

    def _free_with_traffic(self, now_ms: int) -> Effects:
        parts: list[Effects] = []
        for bundle in sorted(self.by_broker.in_state(BundleState.FREE)):
            record = self.ownership.records[bundle]
            if record.state is BundleState.FREE and self._has_traffic(bundle):
                parts.append(self._place(bundle, record, now_ms, reason="lookup") or NOTHING)
        return unanswered(combine(parts))

    def _has_traffic(self, bundle: str) -> bool:
        return has_traffic(bundle, self.load.bundles, self.parents)

    def _stuck(self, now_ms: int) -> Effects:
        parts: list[Effects] = []
        in_flight = (b for state in IN_FLIGHT for b in self.by_broker.in_state(state))
        for bundle in sorted(in_flight):
            record = self.ownership.records[bundle]
            if not in_flight_expired(record, now_ms, self.config):
                continue
            dst = record.dst if (record.state is BundleState.ASSIGNING and record.dst in self.brokers) else None
            parts.append(self._place(bundle, record, now_ms, reason="orphan", force=True, dst=dst) or NOTHING)
        return unanswered(combine(parts))
