"""Bounded real traffic on a real Pulsar cluster, so its brokers report real load.

`run_traffic(plan)` produces and consumes messages on `plan.topics` persistent topics of one
namespace with Apache's Python client (`pulsar-client`): the total rate is split across topics by
a Zipf law (topic k of T gets a share proportional to 1 / k**zipf, so topic 0 is the hottest;
zipf 0 is uniform), every message `plan.size` bytes. `lbctl pulsar traffic` is its command line.

Invariants:
- It always stops by itself: sending ends at `plan.seconds` or after `plan.messages` messages,
  whichever comes first (or when `stop` is set); then it waits at most `plan.drain_seconds` for
  the consumers to catch up, closes everything it opened and returns a `TrafficReport`.
- `sent` counts messages the broker acknowledged, `failed` sends it refused or that timed out;
  `received` counts messages of this run only: each run subscribes under its own subscription
  name before the first send and removes that subscription at the end.
- Per topic, messages issued never exceed `rate_t * elapsed` (+1): a late loop catches up, it
  never runs ahead of the plan.
- It never raises for a broker that goes away mid-run (the client reconnects; what failed is
  counted); a cluster that cannot be reached at the start raises `balancer.errors.Unavailable`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import MalformedInput, Unavailable

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class TrafficPlan:
    """What to run: where, how many topics, how fast, how long, how big."""

    service_url: str
    namespace: str = "public/default"
    topics: int = 16
    rate: float = 400.0
    """Messages per second over all topics."""
    seconds: float | None = 60.0
    messages: int | None = None
    zipf: float = 1.1
    size: int = 1024
    topic_prefix: str = "traffic"
    drain_seconds: float = 15.0
    progress_every: float = 5.0

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str, Any]] = [
            (self.service_url.startswith(("pulsar://", "pulsar+ssl://")),
             "a pulsar:// or pulsar+ssl:// URL", self.service_url),
            (self.namespace.count("/") == 1 and all(self.namespace.split("/")),
             "tenant/namespace", self.namespace),
            (self.topics >= 1, "at least 1 topic", self.topics),
            (self.rate > 0, "a rate above 0 messages/s", self.rate),
            (self.seconds is None or self.seconds > 0, "seconds above 0", self.seconds),
            (self.messages is None or self.messages >= 1, "at least 1 message", self.messages),
            (self.seconds is not None or self.messages is not None,
             "a time limit or a message count (or both)", None),
            (self.zipf >= 0, "a Zipf exponent of 0 or more", self.zipf),
            (self.size >= 1, "a message size of at least 1 byte", self.size),
        ]
        for ok, wanted, value in checks:
            if not ok:
                raise MalformedInput(f"traffic: {value!r} is not {wanted}", value=str(value))

    def topic_names(self) -> list[str]:
        return [f"persistent://{self.namespace}/{self.topic_prefix}-{i:03d}"
                for i in range(self.topics)]

    def rates(self) -> list[float]:
        return zipf_rates(self.topics, self.rate, self.zipf)

    def hosts(self) -> list[tuple[str, int]]:
        """(host, port) of every broker the service URL names (`pulsar://h1:p1,h2:p2`)."""
        found = []
        for item in self.service_url.split("://", 1)[1].rstrip("/").split(","):
            host, _, port = item.rpartition(":")
            found.append((host or item, int(port) if port.isdigit() else 6650))
        return found

    def describe(self) -> str:
        limits = [f"{self.seconds:g} s" if self.seconds else "",
                  f"{self.messages} messages" if self.messages else ""]
        hottest = ", ".join(f"{r:.1f}" for r in self.rates()[:3])
        return (f"traffic: {self.topics} topics of {self.namespace} at {self.rate:g} msg/s "
                f"(hottest first: {hottest} ...), {self.size} B each, until "
                + " or ".join(x for x in limits if x))


def zipf_rates(topics: int, total: float, exponent: float) -> list[float]:
    """`total` split over `topics` by 1 / k**exponent (k = 1..topics), hottest first."""
    weights = [1.0 / (k ** exponent) for k in range(1, topics + 1)]
    scale = total / sum(weights)
    return [w * scale for w in weights]


@dataclass
class TopicCount:
    issued: int = 0
    sent: int = 0
    failed: int = 0
    received: int = 0


@dataclass
class TrafficReport:
    """What a run did; `per_topic` by full topic name, hottest first."""

    seconds: float = 0.0
    """From the first send to the end of sending."""
    per_topic: dict[str, TopicCount] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    size: int = 0

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.per_topic.values())

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.per_topic.values())

    @property
    def received(self) -> int:
        return sum(c.received for c in self.per_topic.values())

    @property
    def complete(self) -> bool:
        """Nothing failed and every message sent was received."""
        return self.failed == 0 and self.received >= self.sent > 0

    def summary(self) -> str:
        rate = self.sent / self.seconds if self.seconds else 0.0
        return (f"sent {self.sent}, received {self.received}, failed {self.failed} in "
                f"{self.seconds:.1f} s ({rate:.0f} msg/s, {self.size} B each, "
                f"{len(self.per_topic)} topics)")

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3), "sent": self.sent, "received": self.received,
            "failed": self.failed, "size": self.size,
            "topics": {name: {"rate": round(self.rates.get(name, 0.0), 3), "sent": c.sent,
                              "received": c.received, "failed": c.failed}
                       for name, c in self.per_topic.items()},
        }


class _Counters:
    """Counts updated from the client's own threads (send callbacks, the message listener)."""

    def __init__(self, names: list[str]) -> None:
        self.lock = threading.Lock()
        self.by_topic = {name: TopicCount() for name in names}

    def on_sent(self, name: str, ok: bool) -> None:
        with self.lock:
            count = self.by_topic[name]
            if ok:
                count.sent += 1
            else:
                count.failed += 1

    def on_received(self, name: str) -> None:
        with self.lock:
            if name in self.by_topic:
                self.by_topic[name].received += 1

    def totals(self) -> tuple[int, int, int, int]:
        with self.lock:
            counts = list(self.by_topic.values())
            return (sum(c.issued for c in counts), sum(c.sent for c in counts),
                    sum(c.failed for c in counts), sum(c.received for c in counts))


def run_traffic(plan: TrafficPlan, *, stop: threading.Event | None = None,
                progress: Progress | None = None) -> TrafficReport:
    """Run `plan` to its end (see the module invariants) and report what happened."""
    import pulsar

    _check_reachable(plan)
    names = plan.topic_names()
    counters = _Counters(names)
    client = pulsar.Client(plan.service_url, operation_timeout_seconds=15,
                           connection_timeout_ms=5000, logger=quiet_logger())
    try:
        consumer, producers = _open(client, plan, names, counters)
        if progress is not None:
            progress(plan.describe())
        report = TrafficReport(rates=dict(zip(names, plan.rates(), strict=True)), size=plan.size,
                               per_topic=counters.by_topic)
        report.seconds = _send_loop(plan, producers, counters, stop or threading.Event(),
                                    progress or (lambda _line: None))
        _drain(plan, producers, counters, progress)
        with contextlib.suppress(Exception):
            consumer.unsubscribe()
        return report
    finally:
        client.close()


def quiet_logger() -> Any:
    """A logger for `pulsar.Client(logger=...)` that drops everything: the client logs every
    (re)connection and retry on stdout; a run counts its failures in its report instead. The C++
    client's own file logger, not a Python `logging.Logger`: with a Python logger the process
    sometimes aborts at exit (pulsar-client-python issue 256)."""
    import pulsar

    return pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def _check_reachable(plan: TrafficPlan) -> None:
    """Fail fast, in one line, when no broker of the service URL accepts a connection (the
    client itself would retry until its operation timeout and log every attempt)."""
    for host, port in plan.hosts():
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=3):
            return
    where = ", ".join(f"{h}:{p}" for h, p in plan.hosts())
    raise Unavailable(f"Pulsar at {plan.service_url}: no broker accepts a connection ({where})")


def _open(client: Any, plan: TrafficPlan, names: list[str],
          counters: _Counters) -> tuple[Any, list[Any]]:
    import pulsar

    def listener(consumer: Any, message: Any) -> None:
        counters.on_received(_full_name(message.topic_name()))
        consumer.acknowledge(message)

    try:
        consumer = client.subscribe(
            names, f"lb-traffic-{uuid.uuid4().hex[:8]}", message_listener=listener,
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Latest)
        producers = [client.create_producer(name, block_if_queue_full=True,
                                            batching_enabled=True,
                                            batching_max_publish_delay_ms=5)
                     for name in names]
    except Exception as exc:
        raise Unavailable(f"Pulsar at {plan.service_url}: cannot open the topics of "
                          f"{plan.namespace}: {exc}") from exc
    return consumer, producers


def _full_name(topic: str) -> str:
    return topic if "://" in topic else f"persistent://{topic}"


def _send_loop(plan: TrafficPlan, producers: list[Any], counters: _Counters,
               stop: threading.Event, progress: Progress) -> float:
    """Send on schedule until the time limit, the message count or `stop`; seconds spent."""
    names, rates = plan.topic_names(), plan.rates()
    payload = b"x" * plan.size
    limit = plan.messages if plan.messages is not None else sys.maxsize
    issued = 0
    began = next_report = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - began
        if (plan.seconds is not None and elapsed >= plan.seconds) or issued >= limit:
            break
        for name, rate, producer in zip(names, rates, producers, strict=True):
            count = counters.by_topic[name]
            due = min(int(rate * elapsed) + 1 - count.issued, limit - issued)
            for _ in range(max(due, 0)):
                count.issued += 1
                issued += 1
                producer.send_async(payload, _callback(counters, name))
        if time.monotonic() >= next_report:
            progress(_progress_line(f"{time.monotonic() - began:6.1f} s", counters))
            next_report += plan.progress_every
        time.sleep(0.005)
    return time.monotonic() - began


def _callback(counters: _Counters, name: str) -> Callable[[Any, Any], None]:
    import pulsar

    def done(result: Any, _message_id: Any) -> None:
        counters.on_sent(name, result == pulsar.Result.Ok)

    return done


def _progress_line(label: str, counters: _Counters) -> str:
    issued, sent, failed, received = counters.totals()
    return (f"{label}  sent {sent}/{issued}  received {received}"
            + (f"  failed {failed}" if failed else ""))


def _drain(plan: TrafficPlan, producers: list[Any], counters: _Counters,
           progress: Progress | None) -> None:
    """Flush, then wait (at most `drain_seconds`) for every answer and every message."""
    deadline = time.monotonic() + plan.drain_seconds
    for producer in producers:
        with contextlib.suppress(Exception):
            producer.flush()
    while time.monotonic() < deadline:
        issued, sent, failed, received = counters.totals()
        if sent + failed >= issued and received >= sent:
            break
        time.sleep(0.05)
    for producer in producers:
        with contextlib.suppress(Exception):
            producer.close()
    if progress is not None:
        progress(_progress_line(" drained", counters))
