"""Shared pytest fixtures for the whole suite.

Sections: Kafka (below); Ray and Spark fixtures go in their own sections, each session-scoped
and started lazily (only when a test requests it), so `tests/unit` never starts a JVM or Ray.

Invariants:
- At most one Kafka per test session (`kafka`), stopped at session end; its source is chosen by
  `tests.kafka_server.kafka_bootstrap` (env KAFKA_BOOTSTRAP_SERVERS > Docker > jars).
- Tests never share topics: each one creates its own, named by `new_topic_name`.
- Tests needing `kafka.restart()` must skip when `kafka.restartable` is false.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator

import pytest

from tests.kafka_server import KafkaHandle, create_topics, kafka_bootstrap

# --- Kafka ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaHandle]:
    """A running Kafka for the session: `.bootstrap_servers`, `.restartable`, `.restart()`."""
    with kafka_bootstrap() as handle:
        yield handle


@pytest.fixture
def new_topic_name() -> Callable[[str], str]:
    """`new_topic_name(prefix)` -> a topic name unique to this run, e.g. `lb-events-3f9a1c2b7d0e`."""

    def make(prefix: str = "test") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    return make


@pytest.fixture
def make_topic(
    kafka: KafkaHandle, new_topic_name: Callable[[str], str]
) -> Callable[..., Awaitable[str]]:
    """`await make_topic(prefix, partitions=1)` creates a fresh topic and returns its name."""

    async def make(prefix: str = "test", partitions: int = 1) -> str:
        name = new_topic_name(prefix)
        await create_topics(kafka.bootstrap_servers, [name], partitions=partitions)
        return name

    return make
