"""The command line's numbers: one argparse ``type`` per kind of numeric flag, and one form of
usage error for all of them.

Invariants:
- a numeric flag takes a finite decimal number inside its range: ``nan``, ``inf``, ``1e999`` and a
  value outside the range are refused while the arguments are parsed, before any work starts;
- every refusal names the flag and the bad value on one line, ``lbctl: error: argument --minutes:
  'nan' is not a finite number`` (the prefix of every other bad input), and exits with status 2;
- ``LbctlParser`` is the parser class of lbctl and of every sub-parser it makes, so a usage error
  anywhere (a bad number, an unknown choice, a missing argument) has that one form.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

Number = int | float


class LbctlParser(argparse.ArgumentParser):
    """argparse with lbctl's one-line usage error (``lbctl: error: ...``, exit 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"lbctl: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _bounds(low: Number | None, high: Number | None, above: bool) -> str:
    if low is not None and high is not None:
        return f"between {low} and {high}"
    if low is not None:
        return f"> {low}" if above else f">= {low}"
    return f"<= {high}"


def _number(kind: type[int] | type[float], low: Number | None, high: Number | None,
            above: bool) -> Callable[[str], Number]:
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> Number:
        try:
            value: Number = kind(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if (low is not None and (value <= low if above else value < low)) \
                or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} must be {_bounds(low, high, above)}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]`` (either end open when None)."""
    return _number(int, low, high, above=False)  # type: ignore[return-value]


def real(low: float | None = None, high: float | None = None, *,
         above: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[low, high]``; ``above``: strictly over ``low``."""
    return _number(float, low, high, above)


COUNT = integer(1)
"""A count of things that must exist: 1 or more."""
NATURAL = integer(0)
"""0 or more (a seed, an index, an offset)."""
PORT = integer(0, 65535)
"""A TCP port; 0 asks for a free one."""
POSITIVE = real(0, above=True)
"""A duration, a rate or an amount that must be more than 0."""
NON_NEGATIVE = real(0)
"""0 or more (a speed, where 0 means as fast as possible)."""
