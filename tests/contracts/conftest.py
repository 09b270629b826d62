"""Fixtures of the EventLog contract suite: one factory per adapter, over the same test bodies.

A ``LogFactory`` opens handles on one underlying log (a ``MemoryStore``, a directory, a Kafka
topic of a fresh cluster name), so "restart" is: close a handle, open a new one on the same
storage. Kafka comes from the session fixture ``kafka`` of ``tests/conftest.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from events.envelope import Stamper, counting_ids
from events.log.kafka import KafkaEventLog
from events.log.local import LocalEventLog
from events.log.memory import MemoryEventLog, MemoryStore
from events.log.port import EventLog

BASE_TS = 1_700_000_000_000  # a plausible wall time: Kafka refuses timestamps far in the future


class StepClock:
    """A clock that moves ``step_ms`` on every reading."""

    def __init__(self, start_ms: int = BASE_TS, step_ms: int = 1000) -> None:
        self.now, self.step = start_ms, step_ms

    def __call__(self) -> int:
        self.now += self.step
        return self.now


class LogFactory:
    """Opens handles of one adapter kind on one shared storage."""

    def __init__(self, kind: str, directory: Path, bootstrap: Callable[[], str]) -> None:
        self.kind = kind
        self.directory = directory
        self.cluster = f"c{uuid.uuid4().hex[:10]}"
        self.memory = MemoryStore(partitions=3)
        self._bootstrap = bootstrap
        self.opened: list[EventLog] = []
        self.clock = StepClock()
        self.ids = counting_ids()
        self.stamper = Stamper(self.clock, self.ids)

    async def open(self, *, writer_id: str = "writer-1", name: str = "events",
                   cluster_id: str | None = None) -> EventLog:
        """A handle; with ``cluster_id`` its appends are stamped with it (and it checks the log's)."""
        log: EventLog
        stamper = self.stamper if cluster_id is None else Stamper(self.clock, self.ids, cluster_id)
        if self.kind == "memory":
            log = MemoryEventLog(name, store=self.memory, stamper=stamper)
        elif self.kind == "local":
            log = LocalEventLog(self.directory / name, name=name, fsync=False, stamper=stamper)
        else:
            log = KafkaEventLog(self._bootstrap(), cluster=self.cluster, name=name, partitions=3,
                                writer_id=writer_id, stamper=stamper, append_timeout_s=30,
                                read_timeout_s=30)
        await log.start()
        self.opened.append(log)
        return log

    async def close_all(self) -> None:
        for log in self.opened:
            await log.close()
        self.opened.clear()


@pytest.fixture(params=["memory", "local", pytest.param("kafka", marks=pytest.mark.kafka)])
async def logs(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LogFactory]:
    def bootstrap() -> str:
        servers: str = request.getfixturevalue("kafka").bootstrap_servers
        return servers

    factory = LogFactory(request.param, tmp_path, bootstrap)
    if request.param == "kafka":
        bootstrap()  # start the session broker before the test's clock starts
    try:
        yield factory
    finally:
        await factory.close_all()
