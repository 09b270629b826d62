"""What-if sweeps: a recorded log's load replayed under other strategies and settings.

Invariants:
- bundle loads are taken as recorded: per shedding cycle, each broker's reports folded as the
  load view folds them (a delta report keeps the bundles it does not list); broker usage is
  re-derived from the counterfactual ownership with a per-broker linear model
  ``cpu = base + per_byte * throughput`` fitted on the recording (Spark's ``regr_*``);
- cycles are the live leader's shedding runs: ``LeaderElected.ts + k * interval`` (k >= 1);
- every grid entry is validated on the driver before anything runs: an unknown strategy or
  broker.conf key is an ``InvalidInput`` naming it;
- each configuration runs ``balancer.simulator.Simulation`` in its own ``applyInPandas`` group
  (the recording reaches every group through one broadcast), seeded, so a sweep is repeatable;
- "as recorded" is a row too; its ``reproduced`` is the share of the live strategy's recorded
  decisions that a replay of the leader's own runs makes (``projections.shed_replay``: each run
  over the log up to the positions the leader had folded when it ran, stamped on the run's
  events, or up to its time in older logs: the strategy sees what the leader saw);
  ``decisions`` counts those decisions and ``not_replayed`` the recorded moves no shedding run
  made (split children, admin unloads, drains), by reason. That replay needs the stored
  bytes (``read_source(..., raw=True)``); without them (a decoded Parquet export) ``reproduced``
  falls back to comparing with the live configuration's counterfactual run (within one cycle).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput
from balancer.load import BundleStats
from balancer.shedding.run import SheddingRun
from balancer.simulator import BrokerModel, Simulation, balance
from events.codec import decode
from events.envelope import Envelope
from events.report_parts import fold_listed, is_continuation
from projections.ownership import REFUSED
from projections.shed_replay import Alignment, align, recorded_runs
from spark_replay.audit import MOVE_TYPES, ownership_rows
from spark_replay.authority import Authority
from spark_replay.sources import bundle_loads_of, cpu_share, readable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SETTLED = 1.25
CYCLE_SCHEMA = ("config_id int, cycle int, max_over_mean double, std double, moves int, "
                "flaps int, usages string, moved string")
STRATEGY_KEY = "loadBalancerLoadSheddingStrategy"
EXTENSIBLE_ONLY = {"TransferShedder": {"loadManagerClassName": "ExtensibleLoadManagerImpl"}}


@dataclass(frozen=True)
class GridConfig:
    label: str
    settings: tuple[tuple[str, Any], ...]

    @property
    def mapping(self) -> dict[str, Any]:
        return dict(self.settings)


def _config(settings: Mapping[str, Any]) -> LoadBalancerConfig:
    strategy = str(settings.get(STRATEGY_KEY, ""))
    extra = {k: v for k, v in EXTENSIBLE_ONLY.get(strategy, {}).items() if k not in settings}
    return LoadBalancerConfig.from_mapping({**extra, **settings})


def expand_grid(base: Mapping[str, Any], strategies: Sequence[str],
                sweep: Mapping[str, Sequence[Any]]) -> list[GridConfig]:
    """Every strategy x every combination of swept values, over ``base``; each one validated
    (``ConfigError``/``UnknownStrategy`` name the bad key or strategy)."""
    names = sorted(sweep)
    out: list[GridConfig] = []
    for strategy in strategies or [str(base.get(STRATEGY_KEY, "ThresholdShedder"))]:
        for values in itertools.product(*(list(sweep[n]) for n in names)):
            settings = {**base, STRATEGY_KEY: strategy, **dict(zip(names, values, strict=True))}
            _config(settings)
            label = " ".join([strategy, *(f"{n}={v}" for n, v in zip(names, values, strict=True))])
            out.append(GridConfig(label, tuple(sorted(settings.items()))))
    return out


def parse_grid(text: str, base: Mapping[str, Any] | None = None) -> list[GridConfig]:
    """A YAML grid: ``{strategies: [...], sweep: {key: [values]}, base: {key: value}}``."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise MalformedInput(f"grid is not YAML: {exc}", value="grid") from None
    if not isinstance(doc, dict) or set(doc) - {"strategies", "sweep", "base"}:
        extra = sorted(set(doc) - {"strategies", "sweep", "base"}) if isinstance(doc, dict) else doc
        raise MalformedInput(f"grid: unknown section(s) {extra}; accepted: strategies, sweep, base",
                             value=str(extra))
    sweep = {str(k): (v if isinstance(v, list) else [v]) for k, v in (doc.get("sweep") or {}).items()}
    return expand_grid({**(base or {}), **(doc.get("base") or {})},
                       [str(s) for s in doc.get("strategies") or []], sweep)


def parse_sets(values: Sequence[str]) -> dict[str, list[str]]:
    """``KEY=V1,V2`` command-line sweeps."""
    out: dict[str, list[str]] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise MalformedInput(f"--set {value!r}: expected KEY=VALUE[,VALUE...]", value=value)
        out[key.strip()] = [v.strip() for v in rest.split(",")]
    return out


# -- the recording -----------------------------------------------------------------------------


@dataclass
class Recording:
    """What a sweep needs from a log, small enough to broadcast (plain JSON-able values)."""

    start_ms: int
    interval_ms: int
    brokers: dict[str, tuple[float, float]]
    owners: dict[str, str]
    trace: list[dict[str, list[float]]]
    usages: list[dict[str, float]] = field(default_factory=list)
    moves: list[tuple[int, str, str, str | None, str]] = field(default_factory=list)
    strategy: str | None = None

    def models(self) -> dict[str, BrokerModel]:
        return {b: BrokerModel(base, per_byte) for b, (base, per_byte) in self.brokers.items()}

    def loads(self) -> Iterator[dict[str, BundleStats]]:
        for cycle in self.trace:
            yield {b: BundleStats(b, msg_rate_in=v[0], msg_rate_out=v[1], msg_throughput_in=v[2],
                                  msg_throughput_out=v[3], topics=int(v[4])) for b, v in cycle.items()}


def load_recording(df: DataFrame, *, interval_ms: int = 60_000,
                   trust: Authority | None = None) -> Recording:
    """The recorded load, ownership and moves. Each broker's bundles per cycle are folded as
    lbctl's load view folds its reports (``projections.load``): a full report sets them, a later
    part adds to them, a delta changes the stats of those it lists and keeps the others. That
    needs the stored records (``trust``'s, or the ``value`` column); a decoded export has no
    mark of a delta, so each cycle takes a broker's latest report's bundles as all it had."""
    from pyspark.sql import functions as F

    rows = readable(df)
    elected = rows.where("type = 'LeaderElected'").agg(F.min("ts")).first()
    first = rows.agg(F.min("ts")).first()
    start = int((elected[0] if elected and elected[0] is not None else first[0] if first else 0) or 0)
    cycle = F.greatest(F.lit(0), F.ceil((F.col("ts") - start) / interval_ms) - 1).cast("int")
    reports = rows.where("type = 'LoadReported'").withColumn("cycle", cycle)
    fits = reports.groupBy("broker").agg(
        F.expr("regr_intercept(cpu, msg_throughput)").alias("base"),
        F.expr("regr_slope(cpu, msg_throughput)").alias("slope"),
        F.avg("cpu").alias("cpu"), F.avg("msg_throughput").alias("tp")).collect()
    brokers = {r["broker"]: _fit(r) for r in fits}
    stored = _stored_reports(reports, trust)
    per_cycle: list[Any] = _folded_reports(stored, start, interval_ms) if stored is not None else \
        reports.groupBy("cycle", "broker").agg(
            F.max_by("bundle_loads", "ts").alias("bundles"), F.max_by("cpu", "ts").alias("cpu")) \
        .orderBy("cycle", "broker").collect()
    trace, usages = _trace(per_cycle)
    owners = _owners(df, start + interval_ms)
    for row in per_cycle:  # no ownership events (an imported Pulsar recording): the reporter owns
        for b in row["bundles"] or []:
            owners.setdefault(b["bundle"], row["broker"])
    moved = rows.where(F.col("type").isin(*MOVE_TYPES)).withColumn("cycle", cycle).select(
        "cycle", "bundle", "src", "dst", "reason", "strategy").orderBy("partition", "offset").collect()
    moves = [(int(r["cycle"]), r["bundle"], r["src"], r["dst"], r["reason"] or "") for r in moved]
    strategy = next((r["strategy"] for r in moved if r["strategy"]), None)
    return Recording(start + interval_ms, interval_ms, brokers, owners, trace, usages, moves, strategy)


def _stored_reports(reports: DataFrame, trust: Authority | None) -> list[Envelope] | None:
    """The load reports in the order lbctl's reader folds them (None: no stored records)."""
    if trust is not None and trust.checked:
        return [e for _, _, e in trust.envelopes if e.type == "LoadReported" and REFUSED not in e.__dict__]
    if "value" not in reports.columns:
        return None
    kept = reports.where("value IS NOT NULL").select("ts", "partition", "offset", "value")
    return [decode(r["value"]) for r in kept.orderBy("ts", "partition", "offset").collect()]


def _folded_reports(reports: Sequence[Envelope], start_ms: int, interval_ms: int) -> list[dict[str, Any]]:
    """Per (cycle, broker), in that order: the broker's bundles and cpu after its last report of
    the cycle, its reports folded as ``projections.load`` folds them. A broker's bundles are
    copied once per cycle it reported in, not once per report."""
    held: dict[str, dict[str, dict[str, Any]]] = {}  # broker -> bundle -> its loads
    cpu: dict[str, float | None] = {}
    out: dict[tuple[int, str], dict[str, Any]] = {}
    open_row: dict[str, tuple[int, str]] = {}  # broker -> the row its held bundles stand for
    for envelope in reports:
        payload = envelope.payload
        broker, load = str(payload["broker_id"]), payload.get("broker_load") or {}
        cycle = max(0, -(-(envelope.ts_ms - start_ms) // interval_ms) - 1)  # load_recording's column
        bundles = held.setdefault(broker, {})
        row = open_row.get(broker)
        if row is not None and row != (cycle, broker):
            out[row]["bundles"] = list(bundles.values())  # the cycle it stood for is over
        if not is_continuation(load):
            cpu[broker] = cpu_share(load)
        fold_listed(bundles, load, ((b["bundle"], b) for b in bundle_loads_of(payload.get("bundles") or [])))
        out[(cycle, broker)] = {"cycle": cycle, "broker": broker, "bundles": [], "cpu": cpu.get(broker)}
        open_row[broker] = (cycle, broker)
    for broker, row in open_row.items():
        out[row]["bundles"] = list(held[broker].values())
    return [out[k] for k in sorted(out)]


def _fit(row: Any) -> tuple[float, float]:
    if row["slope"] is not None and row["slope"] > 0:
        return float(row["base"]), float(row["slope"])
    tp, cpu = float(row["tp"] or 0.0), float(row["cpu"] or 0.0)
    return (0.0, cpu / tp) if tp > 0 else (cpu, 0.0)


def _trace(per_cycle: list[Any]) -> tuple[list[dict[str, list[float]]], list[dict[str, float]]]:
    """Per cycle, the bundles of every broker's latest report (a bundle in two reports: the
    newer one's). A bundle that left every report (a split parent, a bundle since reported by
    its new owner) leaves the trace: its load is never counted twice."""
    latest: dict[str, tuple[int, dict[str, list[float]]]] = {}  # broker -> (cycle, its bundles)
    trace: list[dict[str, list[float]]] = []
    usages: list[dict[str, float]] = []
    for cycle, group in itertools.groupby(per_cycle, key=lambda r: int(r["cycle"])):
        while len(trace) < cycle:  # a cycle nobody reported in keeps the previous loads
            trace.append(dict(trace[-1]) if trace else {})
            usages.append(dict(usages[-1]) if usages else {})
        used: dict[str, float] = dict(usages[-1]) if usages else {}
        for row in group:
            used[row["broker"]] = float(row["cpu"] or 0.0)
            latest[row["broker"]] = (cycle, {
                b["bundle"]: [b["msg_rate_in"], b["msg_rate_out"], b["msg_throughput_in"],
                              b["msg_throughput_out"], float(b["topics"])]
                for b in row["bundles"] or []})
        loads: dict[str, list[float]] = {}
        for _, bundles in sorted(latest.values(), key=lambda item: item[0]):
            loads.update(bundles)  # newer reports last: they win
        trace.append(loads)
        usages.append(used)
    return trace, usages


def _owners(df: DataFrame, at_ms: int) -> dict[str, str]:
    from pyspark.sql import functions as F

    rows = ownership_rows(df).where(f"ts < {int(at_ms)}").groupBy("bundle").agg(
        F.max_by(F.struct("state", "broker"), F.struct("partition", "offset", "part")).alias("last"))
    return {r["bundle"]: r["last"]["broker"] for r in rows.collect()
            if r["last"]["state"] in ("Owned", "Assigning") and r["last"]["broker"]}


# -- the sweep -----------------------------------------------------------------------------------


def simulate(recording: Recording, settings: Mapping[str, Any], seed: int = 0) -> pd.DataFrame:
    """One configuration over the recording: one row per cycle (``CYCLE_SCHEMA`` minus config_id)."""
    config = _config(settings)
    sim = Simulation(config, rng=Random(seed), start_ms=recording.start_ms)
    result = sim.run(recording.owners, recording.models(), recording.loads())
    flaps = result.flaps(max(1, config.grace_period_ms // recording.interval_ms))
    moved: dict[int, list[str]] = {}
    for m in result.moves:
        moved.setdefault(m.cycle, []).append(f"{m.bundle}|{m.source}|{m.destination}|{m.reason}")
    return pd.DataFrame({
        "cycle": [c.cycle for c in result.cycles],
        "max_over_mean": [c.max_over_mean for c in result.cycles],
        "std": [c.std for c in result.cycles], "moves": [c.moves for c in result.cycles],
        "flaps": [flaps] * len(result.cycles),
        "usages": [json.dumps(dict(c.usages), sort_keys=True) for c in result.cycles],
        "moved": [json.dumps(moved.get(c.cycle, [])) for c in result.cycles],
    })


def sweep(spark: SparkSession, recording: Recording, grid: Sequence[GridConfig], *,
          seed: int = 0) -> pd.DataFrame:
    """Per-cycle rows of every configuration (``CYCLE_SCHEMA``), one ``applyInPandas`` group each."""
    shared = spark.sparkContext.broadcast(recording)

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        out = simulate(shared.value, json.loads(pdf["settings"].iloc[0]), seed)
        out.insert(0, "config_id", int(pdf["config_id"].iloc[0]))
        return out

    configs = spark.createDataFrame(
        [(i, json.dumps(dict(c.settings))) for i, c in enumerate(grid)], "config_id int, settings string")
    return configs.repartition(max(1, min(len(grid), 8)), "config_id") \
        .groupBy("config_id").applyInPandas(run, CYCLE_SCHEMA).toPandas()


def summarize(cycles: pd.DataFrame, grid: Sequence[GridConfig]) -> pd.DataFrame:
    """One row per configuration (with its ``config_id``): settled max/mean and std, moves, flaps,
    cycles to settle."""
    rows = []
    for config_id, group in cycles.sort_values(["config_id", "cycle"]).groupby("config_id"):
        rows.append({"config": grid[int(config_id)].label, "config_id": int(config_id), **_metrics(
            list(group["max_over_mean"]), list(group["std"]), int(group["moves"].sum()),
            int(group["flaps"].iloc[0]))})
    return pd.DataFrame(rows).sort_values(["max_over_mean", "moves"], kind="stable").reset_index(drop=True)


def twins(cycles: pd.DataFrame, grid: Sequence[GridConfig]) -> dict[int, tuple[str, int]]:
    """config id -> (``settings`` or ``result``, the first config id it repeats): the same
    effective configuration (every key at its value, defaults included: ``ThresholdShedder (live
    config)`` and ``...Percentage=10`` when 10 is the default), or else the very same run, cycle
    for cycle (a swept key the strategy does not read)."""
    effective = [_config(c.mapping).to_mapping() for c in grid]
    runs: dict[int, tuple[Any, ...]] = {}
    for config_id, group in cycles.sort_values(["config_id", "cycle"]).groupby("config_id"):
        runs[int(config_id)] = (tuple(group["usages"]), tuple(group["moved"]))
    out: dict[int, tuple[str, int]] = {}
    for i in range(len(grid)):
        for j in range(i):
            if j in out:
                continue  # point at the first of a group
            if effective[i] == effective[j]:
                out[i] = ("settings", j)
                break
            if i in runs and runs.get(i) == runs.get(j):
                out[i] = ("result", j)
                break
    return out


def _metrics(ratios: list[float], stds: list[float], moves: int, flaps: int) -> dict[str, Any]:
    tail = max(1, len(ratios) // 3)
    settle = next((i for i in range(len(ratios)) if all(r <= SETTLED for r in ratios[i:])), None)
    return {"max_over_mean": float(pd.Series(ratios[-tail:]).median()) if ratios else 1.0,
            "std": float(pd.Series(stds[-tail:]).median()) if stds else 0.0,
            "moves": moves, "flaps": flaps, "settle_cycles": settle}


def align_recording(df: DataFrame, settings: Mapping[str, Any],
                    trust: Authority | None = None) -> Alignment | None:
    """The live strategy's recorded runs replayed over the log (None without stored bytes, or
    when the log holds no run of it: nothing to reproduce). ``trust``: the records decoded and
    verified once already (``spark_replay.authority``), whose refused ones are left out."""
    from pyspark.sql import functions as F

    if "value" not in df.columns:
        return None
    config = _config(settings)
    strategy = SheddingRun(config).strategy.name
    if trust is not None and trust.checked:
        kept = [(p, o, e) for p, o, e in trust.envelopes if REFUSED not in e.__dict__]
        shed = sorted(((e.ts_ms, p, o, e) for p, o, e in kept if e.type in RUN_TYPES),
                      key=lambda t: t[:3])
        runs = recorded_runs(((o, e) for _, _, o, e in shed), strategy)
        return align(iter(kept), runs, config) if runs.runs else None
    stored = readable(df).where(F.col("value").isNotNull()).select("partition", "offset", "ts", "type", "value")
    runs = recorded_runs(((r["offset"], decode(r["value"])) for r in stored.where(
        F.col("type").isin(*RUN_TYPES)).orderBy("ts", "partition", "offset").collect()),
        strategy)
    if not runs.runs:
        return None
    # In any order: the replay puts each partition in offset order itself (``LogCursor``).
    return align(((r["partition"], r["offset"], decode(r["value"])) for r in stored.toLocalIterator()),
                 runs, config)


RUN_TYPES = ("SheddingSkipped", *MOVE_TYPES)
"""The records that tell the leader's shedding runs apart."""


def as_recorded(recording: Recording, live: pd.DataFrame | None, grace_cycles: int,
                alignment: Alignment | None = None) -> dict[str, Any]:
    """The recording's own row; ``reproduced`` from the replay of the leader's runs, else from the
    live configuration's counterfactual run."""
    stats = [balance(list(u.values())) for u in recording.usages]
    previous: dict[str, tuple[int, str]] = {}
    flaps = 0
    for cycle, bundle, src, dst, _ in recording.moves:
        before = previous.get(bundle)
        if before is not None and (cycle - before[0] < grace_cycles or dst == before[1]):
            flaps += 1
        previous[bundle] = (cycle, src)
    row = {"config": "as recorded" + (f" ({recording.strategy})" if recording.strategy else ""),
           **_metrics([s[0] for s in stats], [s[1] for s in stats], len(recording.moves), flaps)}
    if alignment is not None:
        row["reproduced"], row["decisions"] = alignment.reproduced, alignment.decisions
        row["not_replayed"] = ", ".join(f"{r or '-'} {n}" for r, n in sorted(alignment.unmodelled.items()))
    else:
        row["reproduced"] = reproduced(recording, live) if live is not None else None
    return row


NOT_SHEDDING = frozenset({"split", "admin", "shutdown"})
"""Reasons of recorded moves no shedding strategy made (a split's children unloaded, an
operator's unload, a broker's drain): the simulator does not replay them."""


def reproduced(recording: Recording, live: pd.DataFrame, tolerance: int = 1) -> float:
    """Share of the recorded shedding decisions (unloads and transfers a strategy made, by
    bundle and source) the live configuration's run also makes within
    ``tolerance`` cycles (the simulator folds one report round per cycle, the live leader every
    report, so averages may cross a threshold a cycle apart). With no recorded unload, whether
    the simulator too made none."""
    simulated: list[tuple[int, str, str]] = []
    for r in live.itertuples():
        simulated += [(int(r.cycle), *m.split("|")[:2]) for m in json.loads(r.moved)]
    decided = [m for m in recording.moves if m[4] not in NOT_SHEDDING]
    if not decided:
        return 1.0 if not simulated else 0.0
    unmatched = list(simulated)
    hits = 0
    for cycle, bundle, src, _, _ in decided:
        match = next((m for m in unmatched if m[1:] == (bundle, src) and abs(m[0] - cycle) <= tolerance),
                     None)
        if match is not None:
            unmatched.remove(match)
            hits += 1
    return hits / len(decided)


@dataclass
class WhatIf:
    summary: pd.DataFrame
    """One row per configuration, ranked (best balance first), then the "as recorded" row."""
    cycles: pd.DataFrame
    grid: list[GridConfig]
    recording: Recording
    alignment: Alignment | None = None
    """The leader's recorded runs next to their replay (None: no stored bytes, or no run)."""


def whatif(spark: SparkSession, df: DataFrame, grid: Sequence[GridConfig], *,
           live: Mapping[str, Any] | None = None, seed: int = 0,
           trust: Authority | None = None) -> WhatIf:
    """The sweep with the live configuration first (``live``, else the recording's strategy with
    Pulsar's defaults), then ``grid``; the leader's recorded runs are replayed to measure how much
    of the recording the live strategy reproduces (``align_recording``)."""
    recording = load_recording(df, trust=trust)
    settings = dict(live or {})
    if recording.strategy and STRATEGY_KEY not in settings:
        settings[STRATEGY_KEY] = recording.strategy
    _config(settings)
    full = [GridConfig(f"{settings.get(STRATEGY_KEY, 'ThresholdShedder')} (live config)",
                       tuple(sorted(settings.items()))), *grid]
    # The replay of the leader's runs is a fold on the driver, the sweep runs on the executors:
    # one waits on the other's sockets, so they overlap (the fold took a third of a 20,000-record
    # what-if when it ran after the sweep).
    with ThreadPoolExecutor(1, thread_name_prefix="align") as pool:
        aligning = pool.submit(align_recording, df, settings, trust)
        cycles = sweep(spark, recording, full, seed=seed)
        alignment = aligning.result()
    live_cycles = cycles[cycles["config_id"] == 0].sort_values("cycle")
    grace = max(1, _config(settings).grace_period_ms // recording.interval_ms)
    ranked = summarize(cycles, full)
    same = twins(cycles, full)
    ranked["same_as"] = [f"same {same[i][0]} as {full[same[i][1]].label}" if i in same else ""
                         for i in ranked.pop("config_id")]
    recorded = as_recorded(recording, live_cycles, grace, alignment)
    summary = pd.DataFrame([*ranked.to_dict(orient="records"), recorded])
    if "decisions" in summary:  # a count, blank on the simulated rows
        summary["decisions"] = pd.Series([None if pd.isna(v) else int(v) for v in summary["decisions"]],
                                         dtype=object)
    return WhatIf(summary, cycles, full, recording, alignment)
