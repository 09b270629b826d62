"""A pytest plugin: a run stopped by SIGTERM ends as one stopped by Ctrl-C does.

Invariant: SIGTERM raises ``KeyboardInterrupt`` in the main thread, so pytest tears down the
session's fixtures, and no Kafka, Ray or Pulsar a run started outlives it (CI's cancel and
``timeout`` send SIGTERM; its default action would kill the run with its servers still up). A
second SIGTERM kills at once, as it would have without this plugin.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
