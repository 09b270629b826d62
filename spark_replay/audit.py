"""Invariants over the whole recorded history, ownership timelines and move statistics.

Checks (each violation names the record(s) by topic, partition and offset):
- ``seq_gap`` / ``seq_repeat``: per (topic, key), in log order, every seq is the previous + 1;
- ``stale_epoch``: per (topic, key), an epoch never falls below one already written there;
- ``double_owner``: a bundle becomes Owned by one broker while another still owns it;
- ``unassigned_owner``: a bundle becomes Owned by a broker it was not being assigned to;
- ``in_flight_timeout``: a transfer (TransferPrepared) or unload (UnloadRequested) reaches no end
  state (Owned, Free, Deleted) within the in-flight bound, or not at all by the end of the log.
  The bound is the in-flight wait or ``LAG_MULTIPLE`` times the log's own median handover,
  whichever is longer: a liveness rule measured against how fast this cluster hands over, so a
  machine busy with other work (every handover slower) does not read as stuck moves, while a
  move that lags the others by an order of magnitude, or never ends, still does;
- ``ranges_tile``: the children of a split tile their parent, and at the end of the log every
  namespace's live bundles tile the hash space;
- ``corrupt_record``: a stored value that does not decode (it is skipped by every other check);
- ``forged`` / ``unauthorized`` (and a deposed leader's ``stale_epoch``): a record lbctl's reader
  refuses for its writer (``spark_replay.authority``: the same fold, signatures verified once
  where the records are decoded); it is named and left out of every other check. Only where
  the stored bytes are read (a log, Kafka, a raw export), not in a decoded export;
- ``paused_move``: a shedding move (not an operator's unload, not a drain) that started, or a
  split of the leader's own sent, while an operator's pause held; ``throttle_cap``: a shedding
  move whose start took the moves in flight (per broker, in the cluster) or the starts of the
  last minute over the throttle's caps (those of ``--conf``). Both fold ``projections.control``
  over the pause and move records, which reach the driver (a few per move);
- ``drained_received``: a broker received a bundle (an assignment, a transfer to it) decided
  while an operator's drain of it held (``projections.drain``, over the drain, assignment and
  transfer records, which reach the driver).
- ``unapproved_move``: a shedding move of a proposal recorded in review mode (or, with
  ``loadBalancerExecution=review`` in ``--conf``, any shedding move) that started without an
  approval before it, or after its proposal went stale, was rejected or cancelled
  (``projections.proposals.ApprovalHistory``, over the proposal records: one per cycle).

Invariants of the code: all per-record work is Spark SQL window functions (sorted per key or per
bundle), only the violations, the namespace layouts and aggregates reach the driver; a bundle's
events are all under its namespace's key, so (partition, offset) orders them.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from balancer.bundles import HASH_MAX, HashRange
from balancer.control import Caps, caps_exceeded
from balancer.errors import InvalidBundle
from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    ExecutionFailed,
    ExecutionRequested,
    Message,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
    from_payload,
)
from projections.control import WATCHED, ControlHistory
from projections.drain import WATCHED as DRAIN_WATCHED
from projections.drain import DrainHistory
from projections.proposals import ApprovalHistory
from spark_replay.authority import Authority, check_authority, entitled
from spark_replay.sources import PROPOSAL_TYPES, readable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CHECKS: tuple[tuple[str, str], ...] = (
    ("seq_gap", "every record of a key follows the previous one's seq + 1"),
    ("seq_repeat", "no seq of a key is written twice or out of order"),
    ("stale_epoch", "no key is written at an epoch below one already written there"),
    ("double_owner", "no bundle becomes owned by a broker while another owns it"),
    ("unassigned_owner", "a bundle becomes owned only by the broker it was being assigned to"),
    ("in_flight_timeout", "every transfer and unload ends (Owned, Free, Deleted) within the in-flight bound"),
    ("ranges_tile", "a split's children tile their parent; each namespace's bundles tile the hash space"),
    ("corrupt_record", "every stored record decodes"),
    ("paused_move", "no shedding move starts and no leader's split is sent while an operator's pause holds"),
    ("throttle_cap", "no shedding move starts over the throttle's caps (those of --conf)"),
    ("drained_received", "a drained broker receives nothing (no assignment or transfer to it)"),
    ("unapproved_move", "in review mode no shedding move starts without an approved, non-stale proposal"),
    ("forged", "every record of a signed log is signed by an identity the log's root certified"),
    ("unauthorized", "every record's writer may write it (role, key, elected epoch, the log's cluster)"),
)
"""Every check the audit runs, in the order it reports them, with what each one holds."""

AUTHORITY_CHECKS = ("forged", "unauthorized")
"""Checks that need the stored bytes (not in a decoded export)."""
DEFAULT_IN_FLIGHT_MS = 30_000
LAG_MULTIPLE = 10
"""A move counts as stuck past this many median handovers of its own log (and the wait)."""
OWNERSHIP_TYPES = ("BundleAssigned", "BundleOwned", "UnloadRequested", "TransferPrepared",
                   "BundleReleased", "SplitRequested", "SplitCompleted")
MOVE_TYPES = ("TransferPrepared", "UnloadRequested")
VIOLATION_COLUMNS = ("check", "topic", "key", "bundle", "partition", "offset", "related_offset",
                     "ts", "detail")


@dataclass(frozen=True, slots=True)
class Violation:
    check: str
    topic: str | None
    key: str | None
    bundle: str | None
    partition: int | None
    offset: int | None
    related_offset: int | None
    ts: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in VIOLATION_COLUMNS}


@dataclass(frozen=True)
class AuditReport:
    events: int
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    end_ms: int = 0
    """The timestamp of the log's last record (0: an empty log)."""
    in_flight_bound_ms: int = DEFAULT_IN_FLIGHT_MS
    """How long a move could stay in flight before it counted as stuck (see the module's rule)."""
    median_handover_ms: int | None = None
    """The median time from a move to its end state over the log's completed moves."""
    checks: tuple[str, ...] = tuple(name for name, _ in CHECKS)
    """The checks that ran (``throttle_cap`` only with the throttle's caps)."""
    notes: tuple[str, ...] = ()
    """What broke no rule but an operator would want named: receptions that raced a drain."""

    @property
    def clean(self) -> bool:
        return not self.violations

    def by_check(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for v in self.violations:
            counts[v.check] = counts.get(v.check, 0) + 1
        return dict(sorted(counts.items()))

    def of(self, check: str) -> list[Violation]:
        return [v for v in self.violations if v.check == check]


# -- per key: seq and epoch ------------------------------------------------------------------------


def key_violations(df: DataFrame) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("topic", "key").orderBy("partition", "offset")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    rows = readable(df).select("topic", "key", "partition", "offset", "seq", "epoch", "ts", "bundle") \
        .withColumn("prev_seq", F.lag("seq").over(w)) \
        .withColumn("prev_offset", F.lag("offset").over(w)) \
        .withColumn("top", F.max(F.struct("epoch", "offset")).over(before))
    return _found(rows, [
        ("seq_gap", F.col("seq") > F.col("prev_seq") + 1, F.col("prev_offset"),
         F.format_string("seq %d follows %d: %d missing", "seq", "prev_seq",
                         F.col("seq") - F.col("prev_seq") - 1)),
        ("seq_repeat", F.col("seq") <= F.col("prev_seq"), F.col("prev_offset"),
         F.format_string("seq %d after %d (duplicate or out of order)", "seq", "prev_seq")),
        ("stale_epoch", F.col("epoch") < F.col("top.epoch"), F.col("top.offset"),
         F.format_string("epoch %d after epoch %d was written", "epoch", "top.epoch")),
    ])


def _found(rows: DataFrame, checks: list[tuple[str, Column, Column, Column]]) -> DataFrame:
    """One violation row per (row, check whose condition holds): one pass over ``rows``.

    A union of one filter per check would be simpler, but column pruning gives every branch its
    own plan, so each would shuffle and sort the whole history again (7 sorts where 2 do)."""
    from pyspark.sql import functions as F

    hits = [F.when(cond, F.struct(F.lit(name).alias("check"), related.cast("long").alias("related_offset"),
                                  detail.alias("detail")))
            for name, cond, related, detail in checks]
    any_hit = functools.reduce(operator.or_, [F.coalesce(cond, F.lit(False)) for _, cond, _, _ in checks])
    found = rows.where(any_hit).select(
        "topic", "key", "bundle", "partition", "offset", "ts",
        F.explode(F.filter(F.array(*hits), lambda hit: hit.isNotNull())).alias("hit"))
    return found.select(F.col("hit.check").alias("check"), "topic", "key", "bundle", "partition", "offset",
                        "hit.related_offset", "ts", "hit.detail")


# -- per bundle: ownership state ---------------------------------------------------------------------


def ownership_rows(df: DataFrame) -> DataFrame:
    """One row per bundle state change: (bundle, state, broker) in log order; a split's children
    become Owned by its owner at the SplitCompleted record."""
    from pyspark.sql import functions as F

    events = readable(df).where(F.col("type").isin(*OWNERSHIP_TYPES))
    state = (F.when(F.col("type") == "BundleAssigned", "Assigning")
             .when(F.col("type") == "BundleOwned", "Owned")
             .when(F.col("type").isin(*MOVE_TYPES), "Releasing")
             .when(F.col("type") == "BundleReleased", "Free")
             .when(F.col("type") == "SplitRequested", "Splitting")
             .otherwise("Deleted"))
    base = events.select("topic", "key", "partition", "offset", "ts", "type", "bundle",
                         state.alias("state"),
                         F.coalesce(F.when(F.col("type").isin(*MOVE_TYPES), F.col("src")),
                                    F.col("broker"), F.col("src")).alias("broker"),
                         F.lit(0).alias("part"))
    splits = events.where("type = 'SplitCompleted'")
    parents = splits.where(~F.array_contains("children", F.col("bundle"))).select(
        "topic", "key", "partition", "offset", "ts", "type", "bundle", F.lit("Deleted").alias("state"),
        "broker", F.lit(0).alias("part"))
    children = splits.select("topic", "key", "partition", "offset", "ts", "type",
                             F.posexplode("children").alias("part", "bundle"), "broker") \
        .select("topic", "key", "partition", "offset", "ts", "type", "bundle",
                F.lit("Owned").alias("state"), "broker", (F.col("part") + 1).alias("part"))
    return base.where("type <> 'SplitCompleted'").unionByName(parents).unionByName(children)


def ownership_ends(df: DataFrame) -> DataFrame:
    """``ownership_rows`` with each row's previous state, broker and offset and its next end
    state (``end``: ts and offset of the next Owned, Free or Deleted of its bundle)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("bundle").orderBy("partition", "offset", "part")
    ended = F.when(F.col("state").isin("Owned", "Free", "Deleted"), F.struct("ts", "offset"))
    # The next end state: a lead that skips nulls shares the one sort of the lags, where a frame
    # "1 following .. unbounded" is recomputed per row (quadratic per bundle) and a running
    # frame over the reversed order needs a second sort.
    rows = ownership_rows(df).withColumn("ended", ended) \
        .withColumn("prev_state", F.lag("state").over(w)) \
        .withColumn("prev_broker", F.lag("broker").over(w)) \
        .withColumn("prev_offset", F.lag("offset").over(w)) \
        .withColumn("end", F.expr("lead(ended) IGNORE NULLS").over(w))
    return rows


def median_handover_ms(rows: DataFrame) -> int | None:
    """The median time from a move to its end state over the completed moves of ``rows``."""
    from pyspark.sql import functions as F

    done = rows.where(F.col("type").isin(*MOVE_TYPES) & F.expr("end IS NOT NULL"))
    found = done.agg(F.percentile_approx(F.expr("end.ts - ts"), 0.5).alias("median")).first()
    return None if found is None or found["median"] is None else int(found["median"])


def in_flight_bound(in_flight_ms: int, median_ms: int | None) -> int:
    """The in-flight wait, or ``LAG_MULTIPLE`` median handovers when that is longer."""
    return max(int(in_flight_ms), LAG_MULTIPLE * (median_ms or 0))


def bundle_violations(rows: DataFrame, wait: int, end_ts: int) -> DataFrame:
    """The ownership checks over ``ownership_ends`` rows, with ``wait`` the in-flight bound."""
    from pyspark.sql import functions as F

    move = F.col("type").isin(*MOVE_TYPES)
    return _found(rows, [
        ("double_owner", F.expr("state = 'Owned' AND prev_state = 'Owned' AND broker <> prev_broker"),
         F.col("prev_offset"), F.format_string("owned by %s while %s owns it", "broker", "prev_broker")),
        ("unassigned_owner", F.expr(
            "state = 'Owned' AND type = 'BundleOwned' AND prev_state IS NOT NULL AND prev_state <> 'Owned' "
            "AND NOT (prev_state = 'Assigning' AND broker = prev_broker)"),
         F.col("prev_offset"), F.format_string("owned by %s, but the bundle was %s (%s)", "broker",
                                               "prev_state", F.coalesce("prev_broker", F.lit("-")))),
        ("in_flight_timeout", move & F.expr(f"end IS NOT NULL AND end.ts - ts > {wait}"), F.col("end.offset"),
         F.format_string(f"%s completed after %d ms (in-flight bound {wait} ms)", "type",
                         F.col("end.ts") - F.col("ts"))),
        ("in_flight_timeout", move & F.expr(f"end IS NULL AND {int(end_ts)} - ts > {wait}"), F.lit(None),
         F.format_string(f"%s never completed ({int(end_ts)} - %d ms to the end of the log)", "type", "ts")),
    ])


# -- per namespace: the layout tiles the hash space ----------------------------------------------------


def _range(bundle: str) -> HashRange | None:
    try:
        return HashRange.parse(bundle.rsplit("/", 1)[-1])
    except InvalidBundle:
        return None


def _gaps(ranges: Iterable[HashRange | None], lower: int, upper: int) -> str | None:
    """Why ``ranges`` do not tile [lower, upper], or None if they do."""
    found = sorted((r for r in ranges), key=lambda r: (r.lower, r.upper) if r else (-1, -1))
    if not found or any(r is None for r in found):
        return "a bundle id that is not a hash range" if found else "no bundles"
    edge = lower
    for r in found:
        assert r is not None
        if r.lower != edge:
            return f"{'gap' if r.lower > edge else 'overlap'} at 0x{edge:08x} (next bundle starts at 0x{r.lower:08x})"
        edge = r.upper
    return None if edge == upper else f"ends at 0x{edge:08x}, not 0x{upper:08x}"


def tiling_violations(df: DataFrame) -> list[Violation]:
    rows = readable(df).where("type IN ('NamespaceCreated', 'SplitCompleted')").select(
        "topic", "key", "partition", "offset", "ts", "type", "namespace", "bundle", "children",
        "boundaries").collect()
    # A few rows (one per namespace and split): sorted here, not by a Spark sort and its shuffle.
    rows.sort(key=lambda row: (row["partition"], row["offset"]))
    live: dict[str, dict[str, int]] = {}  # namespace -> bundle -> offset that made it live
    last: dict[str, Any] = {}
    out: list[Violation] = []
    for row in rows:
        ns = row["namespace"]
        last[ns] = row
        if row["type"] == "NamespaceCreated":
            edges = list(row["boundaries"])
            live[ns] = {f"{ns}/0x{a:08x}_0x{b:08x}": row["offset"] for a, b in itertools.pairwise(edges)}
            continue
        parent, children = row["bundle"], list(row["children"])
        span = _range(parent)
        why = _gaps(map(_range, children), span.lower, span.upper) if span else "parent is not a range"
        if why:
            out.append(_row_violation(row, parent, f"children of split {parent}: {why}"))
        layout = live.setdefault(ns, {})
        layout.pop(parent, None)
        layout.update(dict.fromkeys(children, row["offset"]))
    for ns, layout in sorted(live.items()):
        why = _gaps(map(_range, layout), 0, HASH_MAX)
        if why:
            out.append(_row_violation(last[ns], None, f"bundles of {ns} at the end of the log: {why}"))
    return out


def _row_violation(row: Any, bundle: str | None, detail: str) -> Violation:
    return Violation("ranges_tile", row["topic"], row["key"], bundle, row["partition"], row["offset"],
                     None, row["ts"], detail)


# -- the audit -------------------------------------------------------------------------------------


def audit(df: DataFrame, *, in_flight_ms: int = DEFAULT_IN_FLIGHT_MS, caps: Caps | None = None,
          review: bool = False, trust: Authority | None = None) -> AuditReport:
    """Every check over ``df`` (a ``sources`` DataFrame); violations sorted by log position;
    ``caps``: the throttle's, which no shedding move may have exceeded; ``review``: the
    configuration's execution mode is review (every shedding move needs an approval);
    ``trust``: who wrote each record, decided by lbctl's reader (``spark_replay.authority``;
    computed here when not given, from the stored bytes a ``raw`` read keeps). The records it
    refuses are named and left out of every other check."""
    from pyspark.sql import functions as F

    totals = df.agg(F.count(F.lit(1)).alias("n"), F.max("ts").alias("end")).first()
    events, end_ts = int(totals["n"]) if totals else 0, int(totals["end"] or 0) if totals else 0
    trust = trust if trust is not None else check_authority(df)
    df = entitled(df, trust)
    corrupt = df.where("error IS NOT NULL").select(
        F.lit("corrupt_record").alias("check"), "topic", "key", "bundle", "partition", "offset",
        F.lit(None).cast("long").alias("related_offset"), "ts", F.col("error").alias("detail"))
    rows = ownership_ends(df).cache()
    median = median_handover_ms(rows)
    bound = in_flight_bound(in_flight_ms, median)
    found = corrupt.unionByName(key_violations(df)).unionByName(
        bundle_violations(rows, bound, end_ts)).collect()
    rows.unpersist()
    violations = [Violation(**{name: row[name] for name in VIOLATION_COLUMNS}) for row in found]
    violations += tiling_violations(df)
    violations += control_violations(df, caps, review)
    drained, notes = drain_violations(df)
    violations += drained
    violations += [Violation(r.kind, r.topic, r.key, None, r.partition, r.offset, None, r.ts, r.detail)
                   for r in trust.refused]
    violations.sort(key=lambda v: (v.topic or "", v.partition or 0, v.offset or 0, v.check))
    ran = tuple(name for name, _ in CHECKS if (caps is not None or name != "throttle_cap")
                and (trust.checked or name not in AUTHORITY_CHECKS))
    return AuditReport(events, tuple(violations), end_ts, bound, median, ran, tuple(notes))


def timeline(df: DataFrame) -> DataFrame:
    """Bundle -> owner intervals: (bundle, owner, from_offset, from_ts, to_offset, to_ts, ended_by);
    ``to_*`` null while the bundle is still owned at the end of the log."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("bundle").orderBy("partition", "offset", "part")
    rows = ownership_rows(df).withColumn("next", F.lead(F.struct("offset", "ts", "type")).over(w))
    return rows.where("state = 'Owned'").select(
        "bundle", F.col("broker").alias("owner"), F.col("offset").alias("from_offset"),
        F.col("ts").alias("from_ts"), F.col("next.offset").alias("to_offset"),
        F.col("next.ts").alias("to_ts"), F.col("next.type").alias("ended_by"),
    ).orderBy("bundle", "from_offset")


def move_stats(df: DataFrame) -> DataFrame:
    """Moves per broker and hour with their reasons: (hour, broker, direction, reason, moves),
    ``direction`` ``out`` for the source, ``in`` for a transfer's destination."""
    from pyspark.sql import functions as F

    moves = readable(df).where(F.col("type").isin(*MOVE_TYPES)).select(
        (F.col("ts") - F.col("ts") % 3_600_000).alias("hour_ms"), "src", "dst", "reason")
    out = moves.select("hour_ms", F.col("src").alias("broker"), F.lit("out").alias("direction"), "reason")
    into = moves.where("dst IS NOT NULL").select(
        "hour_ms", F.col("dst").alias("broker"), F.lit("in").alias("direction"), "reason")
    return out.unionByName(into).groupBy("hour_ms", "broker", "direction", "reason") \
        .agg(F.count(F.lit(1)).alias("moves")) \
        .select(F.from_unixtime(F.col("hour_ms") / 1000, "yyyy-MM-dd HH:00").alias("hour"),
                "hour_ms", "broker", "direction", "reason", "moves") \
        .orderBy("hour_ms", "broker", "direction", "reason")


# -- the operator's hold: no shedding move while paused, the throttle's caps -------------------------


CONTROL_COLUMNS = ("type", "bundle", "src", "dst", "broker", "reason", "decision", "ts")


def control_violations(df: DataFrame, caps: Caps | None, review: bool = False) -> list[Violation]:
    """``paused_move``: a shedding move that started while a pause held; ``throttle_cap``: a
    start that took moves in flight or per minute over ``caps`` (``projections.control``);
    ``unapproved_move``: the approval rule (``projections.proposals.ApprovalHistory``)."""
    rows = df.where(df.type.isin(*WATCHED, *PROPOSAL_TYPES, "SplitRequested") & df.error.isNull()) \
        .select(*CONTROL_COLUMNS) \
        .orderBy("partition", "offset").collect()
    history = ControlHistory()
    approvals = ApprovalHistory(review=review)
    for row in rows:
        event = _control_event(row)
        history.take(event, int(row["ts"]))
        approvals.take(event, int(row["ts"]))
    out = [Violation("paused_move", None, None, span.bundle, None, None, None, span.start_ms, line)
           for span, _, line in history.paused_moves()]
    if caps is not None:
        out += [Violation("throttle_cap", None, None, None, None, None, None, _at(line), line)
                for line in caps_exceeded(history.spans, caps)]
    out += [Violation("unapproved_move", None, None, bundle, None, None, None, at, line)
            for bundle, at, line in approvals.violations()]
    return out


def drain_violations(df: DataFrame) -> tuple[list[Violation], list[str]]:
    """``drained_received``: each bundle a broker received from a writer that knew it was drained
    (``projections.drain``); and, as notes, the receptions that raced a drain."""
    rows = df.where(df.type.isin(*DRAIN_WATCHED) & df.error.isNull()).select(*CONTROL_COLUMNS, "seq") \
        .orderBy("partition", "offset").collect()
    history = DrainHistory()
    for row in rows:
        history.take(_drain_event(row), int(row["ts"]), int(row["seq"]))
    found = [Violation("drained_received", None, None, line.split(" ")[3], None, None, None, _at(line), line)
             for line in history.violations()]
    return found, [f"raced a drain: {line}" for line in history.raced()]


def _drain_event(row: Any) -> Message:
    kind, decision = row["type"], row["decision"]
    loaded = json.loads(decision) if decision else {}
    if kind in ("BrokerDrainRequested", "BrokerUndrained"):
        return from_payload(kind, loaded)
    if kind == "BundleAssigned":
        return BundleAssigned(bundle=row["bundle"], dst=row["broker"] or "", reason=row["reason"] or "",
                              decision=loaded)
    return TransferPrepared(bundle=row["bundle"], src=row["src"] or "", dst=row["dst"] or "",
                            reason=row["reason"] or "", decision=loaded)


def _at(line: str) -> int | None:
    head = line.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def _control_event(row: Any) -> Message:
    kind, decision = row["type"], row["decision"]
    loaded = json.loads(decision) if decision else {}
    if kind in ("BalancerPaused", "BalancerResumed", *PROPOSAL_TYPES):
        return from_payload(kind, loaded)
    if kind == "UnloadRequested":
        return UnloadRequested(bundle=row["bundle"], src=row["src"] or "", reason=row["reason"] or "",
                               decision=loaded)
    if kind == "TransferPrepared":
        return TransferPrepared(bundle=row["bundle"], src=row["src"] or "", dst=row["dst"] or "",
                                reason=row["reason"] or "", decision=loaded)
    if kind == "BundleOwned":
        return BundleOwned(bundle=row["bundle"], owner=row["broker"] or "", src=row["src"])
    if kind == "SplitRequested":  # a split: the approval rule reads its proposal and reason
        return SplitRequested(bundle=row["bundle"], src=row["src"] or "", algorithm="",
                              reason=row["reason"] or "", proposal=loaded.get("proposal"))
    if kind == "ExecutionRequested":  # a move of drive mode: what its span needs
        return ExecutionRequested(execution_id="", proposal_id="", bundle=row["bundle"], kind="transfer",
                                  src=row["src"] or "", dst=row["dst"], decision=loaded)
    if kind.startswith("Execution"):  # its end
        return ExecutionFailed(execution_id="", bundle=row["bundle"], reason=kind, detail="", state={})
    return BundleReleased(bundle=row["bundle"], src=row["src"] or "")

