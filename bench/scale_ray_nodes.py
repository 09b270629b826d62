"""Benchmarks S1r-50 and S2r-50 (table S): 50 brokers x 65,536 bundles on 2 Ray nodes with real
Kafka, a cold start and then a full restart of every broker, with the peak memory of all
processes (``bench.scale_ray`` with ``--sizes 50x65536 --nodes 2 --restart``).

``--quick``: 10 x 1,024 on 2 nodes, the same shape. ``python -m bench.scale_ray_nodes [--quick]
[--json PATH] [any flag of bench.scale_ray]``; ``lbctl bench --only S1r-50``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from bench import scale_ray

FULL = "50x65536"
QUICK = "10x1024"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    size = QUICK if "--quick" in args else FULL
    args = [a for a in args if a != "--quick"]
    nodes = [] if "--nodes" in args else ["--nodes", "2"]
    sizes = [] if "--sizes" in args else ["--sizes", size]
    return scale_ray.main([*sizes, *nodes, "--restart", *args])


if __name__ == "__main__":
    raise SystemExit(main())
