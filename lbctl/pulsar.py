"""``lbctl pulsar VERB``: tools for a real Apache Pulsar cluster: ``traffic``, and the reports of
attach's advise and drive modes, ``advise-report`` and ``drive-report`` (``lbctl.steer``).

``lbctl pulsar traffic --service-url pulsar://HOST:PORT [--namespace T/NS] [--topics N]
[--rate MSG_S] [--seconds S] [--messages N] [--zipf A] [--size BYTES]`` produces and consumes
real, Zipf-skewed messages (``bench.pulsar_traffic``) so the brokers report real load, prints
progress, then what was sent and received.

Invariants: bad values exit 2 naming the value, a cluster that cannot be reached exits 2 naming
it (``Unavailable``); a run ends by itself (time limit, message count, Ctrl-C or SIGTERM: then it still drains and reports) and exits 0 only
when nothing failed and every message sent was received, else 1 after its report.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from bench.pulsar_traffic import TrafficPlan, run_traffic
from lbctl import numargs, steer


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("pulsar", help="tools for a real Apache Pulsar cluster (traffic)")
    verbs = parser.add_subparsers(dest="pulsar_verb", metavar="VERB")
    verbs.required = True
    traffic = verbs.add_parser(
        "traffic", help="produce and consume real messages, Zipf-skewed across topics, "
                        "for a bounded time or message count")
    traffic.add_argument("--service-url", required=True, metavar="URL",
                         help="the cluster's binary protocol URL, e.g. pulsar://127.0.0.1:6650")
    traffic.add_argument("--namespace", default="public/default", metavar="TENANT/NS")
    traffic.add_argument("--topics", type=numargs.COUNT, default=16, help="how many topics (default 16)")
    traffic.add_argument("--rate", type=numargs.POSITIVE, default=400.0,
                         help="messages per second over all topics (default 400)")
    traffic.add_argument("--seconds", type=numargs.POSITIVE, default=None,
                         help="stop sending after this long (default 60 without --messages)")
    traffic.add_argument("--messages", type=numargs.COUNT, default=None,
                         help="stop sending after this many messages")
    traffic.add_argument("--zipf", type=numargs.NON_NEGATIVE, default=1.1,
                         help="skew: topic k gets a share of 1/k**ZIPF (0: uniform; default 1.1)")
    traffic.add_argument("--size", type=numargs.COUNT, default=1024, help="bytes per message (default 1024)")
    traffic.add_argument("--topic-prefix", default="traffic",
                         help="topics are PREFIX-000, PREFIX-001, ... (default traffic)")
    traffic.add_argument("--json", action="store_true", help="print the report as JSON")
    traffic.set_defaults(handler=_traffic)
    steer.add_report_verbs(verbs)  # advise-report, drive-report


def _traffic(args: argparse.Namespace) -> int:
    seconds = args.seconds if args.seconds is not None or args.messages is not None else 60.0
    plan = TrafficPlan(service_url=args.service_url, namespace=args.namespace, topics=args.topics,
                       rate=args.rate, seconds=seconds, messages=args.messages, zipf=args.zipf,
                       size=args.size, topic_prefix=args.topic_prefix)
    stop = threading.Event()
    # Ctrl-C (or SIGTERM) ends the sending early; the run still drains and reports.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        report = run_traffic(plan, stop=stop, progress=lambda line: print(line, file=sys.stderr))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.summary())
    if not report.complete:
        print("traffic: not every message sent was received, or some sends failed",
              file=sys.stderr)
        return 1
    return 0
