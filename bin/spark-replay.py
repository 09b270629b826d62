"""The replay jobs as a ``spark-submit`` application: the master, memory and jars are Spark's.

``spark-submit [--master URL] [--jars ...] bin/spark-replay.py VERB SOURCE [options]`` runs
``lbctl replay VERB SOURCE [options]`` (audit, timeline, whatif, export-parquet) in the driver
spark-submit started; the session is the one it configured (``--master`` unset here), and the
exit status is the verb's. The driver's Python (``PYSPARK_DRIVER_PYTHON``) must have
bundle-balancer installed; the file lives outside the package so that spark-submit, which puts
the script's folder first on ``sys.path``, cannot shadow a top-level package with a verb module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from lbctl.main import main
from lbctl.replay import SUBMITTED


def submit(argv: Sequence[str]) -> int:
    os.environ[SUBMITTED] = "1"
    return main(["replay", *argv])


if __name__ == "__main__":
    sys.exit(submit(sys.argv[1:]))
