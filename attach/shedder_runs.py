"""Pulsar's own shedding runs, seen through its leader's metrics: the runs that moved nothing.

The extensible load manager's leader counts every run of its unload scheduler by outcome in
``pulsar_lb_unload_broker_breakdown_total{result, reason}`` (Pulsar's ``UnloadCounter``: one
``Skip`` per run that moved nothing, by the reason its shedder gave, e.g. ``HitCount``; one
``Success`` per bundle it unloaded). A run that moved bundles shows in the ownership channel; one
that skipped shows only here. ``ShedderRuns`` reads the leader's metrics at every poll and turns
each new ``Skip`` into a ``SheddingSkipped`` of Pulsar's strategy under the leader's key, as the
project's own leader records its skips, so advise mode knows when Pulsar's runs happen and why
they did nothing, and the what-if replay finds Pulsar's runs in the log.

Invariants:
- pure: the metrics text, the leader's id and the time come in; appends go out;
- a run is stamped halfway between the scrape that saw it and the one before (it ran in that
  window), and named by the scrape's path in its causation id;
- the first scrape of a leader is a baseline (its counts are history before the mirror looked),
  as is a scrape whose counts went down (the leader restarted); neither records a run;
- every scrape with new ``Success`` counts, and the first scrape of a leader, records one
  ``ShedderUnloadsCounted`` (reason -> bundles the shedder unloaded in the window; empty on the
  first scrape): the moves themselves come from the channel, with their bundles, and these
  counts tell Pulsar's shedder's moves from an operator's (``Failure`` records nothing: a
  failed run left the channel as it was).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from attach.channel import Append
from attach.positions import rest_causation
from events.catalog import ShedderUnloadsCounted, SheddingSkipped

BREAKDOWN = "pulsar_lb_unload_broker_breakdown_total"
METRICS_PATH = "/metrics"
Counts = dict[tuple[str, str], float]


def breakdown(text: str) -> Counts:
    """(result, reason) -> count of the breakdown family in a Prometheus text exposition.

    Only the family's own lines are parsed (a broker's whole exposition is large and read at
    every poll), one at a time, so a line the parser refuses costs that line, not the read."""
    counts: Counts = {}
    for line in text.splitlines():
        if not line.startswith(BREAKDOWN + "{"):
            continue
        try:
            samples = [s for family in text_string_to_metric_families(line + "\n") for s in family.samples]
        except ValueError:
            continue
        for sample in samples:
            key = (sample.labels.get("result", ""), sample.labels.get("reason", ""))
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


@dataclass
class ShedderRuns:
    """Turns successive scrapes of Pulsar's leader into the skipped runs between them."""

    strategy: str = "TransferShedder"
    """The extensible manager's shedder, by the name the project's strategy of it has."""
    leader: str | None = None
    counts: Counts = field(default_factory=dict)
    scraped_ms: int = 0

    def observe(self, leader: str, text: str, now_ms: int) -> list[Append]:
        """The runs Pulsar skipped since the last scrape of ``leader``'s metrics."""
        counts = breakdown(text)
        before, since = self.counts, self.scraped_ms
        baseline = leader != self.leader or any(counts.get(k, 0.0) < v for k, v in before.items())
        self.leader, self.counts, self.scraped_ms = leader, counts, now_ms
        causation = rest_causation(f"{METRICS_PATH} on {leader}")
        if baseline:
            counted = ShedderUnloadsCounted(strategy=self.strategy, since_ms=now_ms, unloaded={})
            return [Append(counted.default_key(), (counted,), now_ms, (causation,))]
        ts = since + (now_ms - since) // 2
        out: list[Append] = []
        unloaded: dict[str, int] = {}
        for (result, reason), value in sorted(counts.items()):
            new = int(value - before.get((result, reason), 0.0))
            if result == "Success" and new > 0:
                unloaded[reason] = new
            for _ in range(new if result == "Skip" else 0):
                event = SheddingSkipped(strategy=self.strategy, reason=reason)
                out.append(Append(event.default_key(), (event,), ts, (causation,)))
        if unloaded:
            counted = ShedderUnloadsCounted(strategy=self.strategy, since_ms=since, unloaded=unloaded)
            out.append(Append(counted.default_key(), (counted,), now_ms, (causation,)))
        return out
