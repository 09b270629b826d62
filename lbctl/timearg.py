"""The command line's time options: ISO-8601 or epoch ms in, argparse's usage error when unreadable."""

from __future__ import annotations

import argparse

from balancer.errors import InvalidInput
from events.times import parse_instant


def instant_arg(text: str) -> int:
    """An argparse ``type``: ISO-8601 (``Z``, an offset, or naive = UTC) or epoch ms -> epoch ms."""
    try:
        return parse_instant(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
