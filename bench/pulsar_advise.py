"""Advise mode against Pulsar's running shedder: the agreement table of the closing note.

A 2-broker cluster with Pulsar's own shedding on; Zipf traffic in a new namespace whose bundles
are first all put on broker 0; then ``lbctl attach URL --mode advise`` for ``--minutes``, with
Pulsar's own settings. Printed: ``lbctl pulsar advise-report`` of the run (each cycle, ours
beside Pulsar's, every disagreement with the load each side saw); ``--html`` writes its page.

``--manager extensible`` runs Pulsar's TransferShedder, with a lower target deviation and a
shorter cool-down so it could move several times in a few minutes. On one machine it sees no
load: Pulsar reads bandwidth from the machine's NICs, loopback excluded (the traffic between
processes on one host never shows), and CPU machine-wide, the same for every broker, so every
broker's ``weightedMaxEMA`` is about 0 and neither side moves. ``--manager modular`` runs
Pulsar's UniformLoadShedder on the modular manager: it reads each broker's message rates and
throughput, which do tell the brokers apart on one machine.

    python -m bench.pulsar_advise [--manager extensible|modular] [--minutes N] [--html FILE]
                                  [--json PATH] [--keep DIR] [--web-url URL --service-url URL]

Given URLs, the cluster must already shed by itself.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from attach.report import advise_report, executions, render_advise, render_html, to_json
from bench.pulsar_drive import Cluster, cluster_for, read_log, skew, traffic

PULSAR_SETTINGS: dict[str, dict[str, object]] = {
    # The setup's unloads (every bundle onto broker 0) are moves like any other: a grace period
    # of a minute lets both sides shed those bundles again soon after.
    "extensible": {
        # Bandwidth reads 0 on one host (loopback) and CPU is host-wide, the same for every
        # broker; heap and direct memory are each broker's own, so with their weights at 1 both
        # shedders see brokers that differ, and the comparison is not "no move" against "no move".
        "loadBalancerMemoryResourceWeight": 1.0,
        "loadBalancerDirectMemoryResourceWeight": 1.0,
        "loadBalancerSheddingGracePeriodMinutes": 1,
        "loadBalancerOverrideBrokerNicSpeedGbps": 0.01,
        "loadBalancerBrokerLoadTargetStd": 0.1,
        "loadBalanceSheddingDelayInSeconds": 60,
    },
    "modular": {
        "loadBalancerSheddingGracePeriodMinutes": 1,
        "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder",
        "minUnloadMessage": 100,
        "minUnloadMessageThroughput": 100_000,
        "maxUnloadPercentage": 0.5,  # at 0.2 no bundle of this traffic fits what one run may move
    },
}


@contextmanager
def shedding_cluster(manager: str, web_url: str | None, service_url: str | None) -> Iterator[Cluster]:
    if web_url is not None:
        with cluster_for(web_url, service_url) as given:
            yield given
        return
    from tests.pulsar_server import PulsarCluster

    with PulsarCluster(brokers=2, load_manager=manager, shedding=True,  # type: ignore[arg-type]
                       overrides=dict(PULSAR_SETTINGS[manager]), cluster_name=f"advise-{manager}") as started:
        yield Cluster(started.web_urls, started.broker_ids, started.service_url, started.cluster_name)


def run(cluster: Cluster, minutes: float, work: Path) -> Path:
    """Skewed traffic and advise mode for ``minutes``; the state directory of the run."""
    from lbctl.main import main

    namespace = f"public/advise-{uuid.uuid4().hex[:8]}"
    answer = cluster.admin().request("PUT", f"/admin/v2/namespaces/{namespace}",
                                     body={"bundles": {"numBundles": 16}})
    assert answer.ok, answer.message
    state = work / "state"
    with traffic(cluster, namespace, minutes * 60 + 120):
        skew(cluster, namespace, cluster.broker_ids[0])
        time.sleep(5)
        status = main(["attach", cluster.web_urls[0], "--state-dir", str(state), "--mode", "advise",
                       "--minutes", str(minutes), "--plain"])
        assert status == 0, f"lbctl attach exited {status}"
    return state


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--manager", choices=sorted(PULSAR_SETTINGS), default="modular",
                        help="Pulsar's load manager (default modular: see above)")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long advise mode runs (default 10)")
    parser.add_argument("--html", default=None, metavar="FILE", help="write the report's page")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON")
    parser.add_argument("--web-url", default=None, help="a running cluster that sheds by itself")
    parser.add_argument("--service-url", default=None, help="its pulsar:// URL")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="keep the run's state directory here (every lbctl verb reads it)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-advise-") as tmp, \
            shedding_cluster(args.manager, args.web_url, args.service_url) as cluster:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        records = read_log(run(cluster, args.minutes, work))
    report = advise_report(records)
    print(render_advise(report))
    if args.html:
        Path(args.html).write_text(render_html(report, executions(records)), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(report, []), indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
