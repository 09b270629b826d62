"""Stopping a host's background tasks for good.

Invariant: ``cancel_all`` returns only once every task is done. Python 3.11's ``wait_for`` can
swallow a cancellation that arrives as its inner future completes (a log waiter woken by an
append at the moment of a close), so a task may survive one ``cancel``: it is cancelled again
until it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_all(tasks: Iterable[asyncio.Task[None]], every_s: float = 0.05) -> None:
    """Cancel ``tasks`` and wait until all are done, cancelling again any that carried on."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every_s)
