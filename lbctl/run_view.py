"""The live view of ``lbctl run``: a ``rich`` screen on a terminal, plain progress lines otherwise.

Invariants:
- a view only renders a ``Frame`` (built by ``lbctl.run`` from ``RunStats`` and the ownership
  view); it never talks to the cluster;
- ``RichView`` redraws in place (``rich.live.Live``) and leaves its last frame on screen;
  ``PlainView`` writes one line per move as it happens and one progress line every
  ``every_ms`` of simulated time, flushed, so a pipe or a CI log shows progress;
- times shown are simulated time since the run began (``HH:MM:SS``);
- each broker expiry is announced: ``PlainView`` prints one line per expiry as it comes,
  ``RichView`` keeps them in red under the header;
- when cluster time fell behind the wall clock x ``--speed`` by ``BEHIND_S`` or more (a host that
  could not keep the speed: cluster time slowed rather than run ahead of its actors), both say by
  how much and what speed was kept.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import IO, Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from lbctl.run_view_wide import is_wide, spread
from projections.moves import Move

BAR_WIDTH = 30
RECENT = 10
BEHIND_S = 1.0
"""Wall seconds behind ``--speed`` from which a view and the summary say the run fell behind
(below: the jitter of a frame)."""


@dataclass(frozen=True, slots=True)
class Pace:
    """How cluster time kept up with the wall clock: ``elapsed_ms`` of it in ``wall_s``."""

    wall_s: float
    elapsed_ms: int
    speed: float

    @property
    def behind_s(self) -> float:
        """Wall seconds more than ``elapsed_ms`` at ``speed`` take (0 for 'as fast as possible')."""
        if self.speed <= 0:
            return 0.0
        return max(0.0, self.wall_s - self.elapsed_ms / 1000.0 / self.speed)

    @property
    def behind(self) -> bool:
        return self.behind_s >= BEHIND_S

    def kept(self) -> float:
        """The speed kept: cluster seconds per wall second."""
        return self.elapsed_ms / 1000.0 / self.wall_s if self.wall_s > 0 else self.speed

    def text(self) -> str:
        return f"{self.behind_s:.1f} s behind ({self.kept():.3g}x kept of {self.speed:g}x)"


@dataclass(frozen=True, slots=True)
class BrokerLine:
    broker: str
    load: float | None
    bundles: int
    msg_rate: float


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything one redraw shows."""

    host: str
    namespace: str
    elapsed_ms: int
    total_ms: int
    wall_s: float
    speed: float
    leader: str | None
    epoch: int
    brokers: list[BrokerLine]
    recent: list[Move] = field(default_factory=list)
    start_ms: int = 0
    moves: int = 0
    expiries: list[tuple[int, str]] = field(default_factory=list)
    """(cluster time, broker) of every expiry so far (``RunStats.expiries``)."""

    def pace(self) -> Pace:
        return Pace(self.wall_s, self.elapsed_ms, self.speed)


class View(Protocol):
    def update(self, frame: Frame, fresh: list[Move]) -> None: ...

    def close(self) -> None: ...


def clock(ms: int) -> str:
    seconds = max(0, ms) // 1000
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def move_text(move: Move, start_ms: int) -> str:
    where = f"{move.src or '-'} -> {move.dst}" if move.dst else f"from {move.src or '-'}"
    return f"[{clock(move.ts_ms - start_ms)}] {move.kind:<8} {move.bundle}  {where}  {move.reason}"


def _speed(speed: float) -> str:
    return f"{speed:g}x" if speed > 0 else "max speed"


EXPIRED = "no load report within the session timeout; its bundles go to other brokers"


def expiry_text(at_ms: int, broker: str, start_ms: int) -> str:
    return f"[{clock(at_ms - start_ms)}] EXPIRED  {broker}: {EXPIRED}"


class PlainView:
    """Lines for a pipe or a log file."""

    def __init__(self, out: IO[str] | None = None, every_ms: int = 5 * 60_000) -> None:
        self.out = out or sys.stdout
        self.every_ms = every_ms
        self._next_ms = 0
        self._announced = 0

    def update(self, frame: Frame, fresh: list[Move]) -> None:
        for move in fresh:
            print(move_text(move, frame.start_ms), file=self.out)
        for at_ms, broker in frame.expiries[self._announced:]:
            print(expiry_text(at_ms, broker, frame.start_ms), file=self.out)
        self._announced = len(frame.expiries)
        if frame.elapsed_ms >= self._next_ms or frame.elapsed_ms >= frame.total_ms:
            self._next_ms = (frame.elapsed_ms // self.every_ms + 1) * self.every_ms
            loads = _plain_loads(frame)
            pace = frame.pace()
            behind = f" | {pace.text()}" if pace.behind else ""
            print(f"[{clock(frame.elapsed_ms)} / {clock(frame.total_ms)}] wall {frame.wall_s:.1f}s "
                  f"leader {frame.leader or '-'} epoch {frame.epoch} | {loads} | moves {frame.moves}"
                  f"{behind}", file=self.out)
        self.out.flush()

    def close(self) -> None:
        self.out.flush()


def _plain_load(line: BrokerLine) -> str:
    return f"{line.broker}={'-' if line.load is None else f'{100 * line.load:.0f}%'}({line.bundles})"


def _plain_loads(frame: Frame) -> str:
    """Every broker, or for a wide cluster the spread and the busiest and idlest ones."""
    if not is_wide(frame.brokers):
        return " ".join(_plain_load(b) for b in frame.brokers)
    summary = spread(frame.brokers)
    by_name = {b.broker: b for b in frame.brokers}
    busiest = " ".join(_plain_load(by_name[b]) for b in summary.busiest)
    idlest = " ".join(_plain_load(by_name[b]) for b in summary.idlest)
    return f"{summary.text()} | busiest {busiest or '-'} | idlest {idlest or '-'}"


class RichView:
    """A redrawn screen: header, brokers with load bars, the latest moves."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._live.start()

    def update(self, frame: Frame, fresh: list[Move]) -> None:
        self._live.update(render(frame), refresh=True)

    def close(self) -> None:
        self._live.stop()


def render(frame: Frame) -> RenderableType:
    header = Text.assemble(
        ("bundle-balancer ", "bold"), f"{frame.host} · {frame.namespace} · ",
        ("sim ", "dim"), (f"{clock(frame.elapsed_ms)} / {clock(frame.total_ms)}", "bold cyan"),
        f" · {_speed(frame.speed)} · wall {frame.wall_s:.0f}s · ",
        ("leader ", "dim"), (f"{frame.leader or '-'} epoch {frame.epoch}", "bold magenta"))
    pace = frame.pace()
    if pace.behind:
        header.append(f" · {pace.text()}", style="bold yellow")
    warnings = [Text(expiry_text(at, broker, frame.start_ms), style="bold red")
                for at, broker in frame.expiries[-RECENT:]]
    return Group(header, *warnings, Panel(_brokers(frame), title="brokers", title_align="left"),
                 Panel(_moves(frame), title=f"bundle moves ({frame.moves})", title_align="left"))


def _bar(load: float | None) -> Text:
    if load is None:
        return Text("no report yet", style="dim")
    filled = min(BAR_WIDTH, round(load * BAR_WIDTH))
    style = "green" if load < 0.6 else "yellow" if load < 0.85 else "red"
    return Text.assemble(("█" * filled, style), ("░" * (BAR_WIDTH - filled), "dim"),
                         f" {100 * load:5.1f}%")


def _brokers(frame: Frame) -> Table:
    table = Table(box=None, expand=False, pad_edge=False)
    for name, justify in (("broker", "left"), ("load (max resource usage)", "left"),
                          ("bundles", "right"), ("msg/s in+out", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    lines = frame.brokers
    if is_wide(lines):
        summary = spread(lines)
        by_name = {b.broker: b for b in lines}
        shown = [*summary.busiest, *(b for b in summary.idlest if b not in summary.busiest)]
        lines = [by_name[b] for b in shown]
        table.caption = f"{summary.text()}; busiest first, then idlest"
    for line in lines:
        table.add_row(line.broker, _bar(line.load), str(line.bundles), f"{line.msg_rate:,.0f}")
    return table


def _moves(frame: Frame) -> RenderableType:
    if not frame.recent:
        return Text("none yet", style="dim")
    table = Table(box=None, expand=False, pad_edge=False)
    for name in ("sim time", "kind", "bundle", "from", "to", "reason"):
        table.add_column(name)
    for move in frame.recent[-RECENT:]:
        table.add_row(clock(move.ts_ms - frame.start_ms), move.kind, move.bundle, move.src or "-",
                      move.dst or "-", move.reason)
    return table
