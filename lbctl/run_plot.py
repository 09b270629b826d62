"""``lbctl run --plot FILE``: the run's balance over time, as a picture.

Two panels sharing the run's clock (simulated minutes since the namespace was created): each
broker's load (max resource usage of its latest report, percent) with the moves marked where
they happened, and the balance (max/mean of the brokers' loads, and their standard deviation).

Invariants: drawn from ``RunStats`` only (the log, as the summary); the Agg backend, so no
display is needed; the format is the file's suffix (``SUFFIXES``); a bad path is refused before
the cluster starts (``check_plot_path``), one line naming it.
"""

from __future__ import annotations

from pathlib import Path

from balancer.errors import MalformedInput
from lbctl.runstats import RunStats

SUFFIXES = (".png", ".svg", ".pdf")
MOVE_COLOURS = {"transfer": "tab:red", "unload": "tab:orange", "split": "tab:purple",
                "takeover": "tab:gray", "assign": "tab:olive"}


def check_plot_path(path: str) -> Path:
    found = Path(path)
    if found.suffix.lower() not in SUFFIXES:
        raise MalformedInput(f"--plot {path}: the file must end in {', '.join(SUFFIXES)}", value=path)
    if not found.parent.resolve().is_dir():
        raise MalformedInput(f"--plot {path}: no directory {str(found.parent)!r}", value=path)
    return found


def write_plot(stats: RunStats, path: Path, title: str) -> Path:
    """Draw ``stats`` to ``path``; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loads, balance) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True,
                                            gridspec_kw={"height_ratios": [3, 2]})
    minutes = [t / 60_000 for t, _ in stats.loads_over_time]
    brokers = sorted({b for _, sample in stats.loads_over_time for b in sample})
    for broker in brokers:
        loads.plot(minutes, [100 * s.get(broker, float("nan")) for _, s in stats.loads_over_time],
                   label=broker, linewidth=1.4)
    for kind, colour in MOVE_COLOURS.items():
        at = [(m.ts_ms - stats.start_ms) / 60_000 for m in stats.moves if m.kind == kind]
        if at:
            loads.vlines(at, 0, 4, colors=colour, linewidth=1, label=f"{kind} ({len(at)})")
    loads.set(ylabel="broker load (max usage, %)", title=title)
    loads.legend(fontsize="small", ncol=2, loc="upper right")
    spread = [_balance(sample) for _, sample in stats.loads_over_time]
    balance.plot(minutes, [b[0] for b in spread], label="max/mean", color="black")
    balance.plot(minutes, [1 + b[1] for b in spread], label="1 + std", color="tab:blue",
                 linestyle="--")
    balance.set(xlabel="simulated minutes", ylabel="balance")
    balance.legend(fontsize="small", loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _balance(loads: dict[str, float]) -> tuple[float, float]:
    """(max/mean, population standard deviation) of one sample, as the summary computes them."""
    values = list(loads.values())
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return (max(values) / mean if mean > 0 else 1.0), std
