"""What starting a cluster takes, on any host: its broker ids, and the handle ``Cluster.start``
returns (its settings: ``actors.conf``). Ray-free, so that a verb on an in-process cluster never
imports Ray.

Invariants: broker ids are distinct, non-empty and hold no ``/``; ``Starting`` launches nothing
until it is awaited or entered, and closes what it started when the ``async with`` block ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from balancer.errors import InvalidInput


class Closable(Protocol):
    async def close(self) -> None: ...


T = TypeVar("T", bound=Closable)


def broker_ids(brokers: int | Sequence[str]) -> tuple[str, ...]:
    """``3`` -> broker-1..broker-3; a list of ids is kept as given (no duplicates)."""
    if isinstance(brokers, int):
        if brokers < 0:
            raise InvalidInput(f"brokers={brokers}: a count must be >= 0", value=brokers)
        return tuple(f"broker-{i}" for i in range(1, brokers + 1))
    ids = tuple(str(b) for b in brokers)
    if len(set(ids)) != len(ids) or any(not b or "/" in b for b in ids):
        raise InvalidInput(f"broker ids {list(ids)}: must be distinct, non-empty, without '/'",
                           value=list(ids))
    return ids


class Starting(Generic[T]):
    """What ``Cluster.start(...)`` returns: ``async with`` it (closed on the way out), or
    ``await`` it (the caller closes)."""

    def __init__(self, launch: Callable[[], Awaitable[T]]) -> None:
        self._launch = launch
        self._started: T | None = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._launch().__await__()

    async def __aenter__(self) -> T:
        self._started = await self._launch()
        return self._started

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._started is not None:
            await self._started.close()
