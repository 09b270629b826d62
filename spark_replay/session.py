"""The Spark session every replay job runs in (infrastructure §3.5).

Invariants:
- the Kafka source jars come from the folder ``make spark-jars`` filled (``BB_SPARK_JARS``, or
  ``.cache/spark-jars`` of the repository) and go on ``spark.jars``: nothing is downloaded at run
  time (no ``spark.jars.packages``);
- Python workers run the interpreter of the driver (``PYSPARK_PYTHON = sys.executable``), so the
  venv's pyarrow and this package are what the executors import;
- the Kafka source's Spark major version is the running PySpark's (Spark 4's jars are Scala 2.13
  and load into no Spark 3): a mismatch is a ``ConfigError`` naming both versions, before a JVM;
- options that size the JVM only take effect before it starts: ``session`` is the one place that
  builds it, and a second call returns the running session unchanged.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from balancer.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JARS = ROOT / ".cache" / "spark-jars"


def kafka_jars() -> list[str]:
    """The jars of Spark's Kafka source fetched at install time (empty if never fetched)."""
    folder = Path(os.environ.get("BB_SPARK_JARS") or DEFAULT_JARS)
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def check_jar_versions(jars: list[str], pyspark_version: str) -> None:
    """Refuse Kafka source jars built for another Spark major version than the running one."""
    for jar in jars:
        found = re.search(r"spark-sql-kafka-0-10_[\d.]+-(\d+)\.[\w.-]+\.jar$", jar)
        if found and found[1] != pyspark_version.split(".")[0]:
            raise ConfigError(
                f"{Path(jar).name} is Spark {found[1]}'s Kafka source but PySpark is {pyspark_version}: "
                f"reinstall (make install) so the two match", value=jar)


def session(master: str | None = "local[2]", *, driver_memory: str = "1g", shuffle_partitions: int = 32,
            app_name: str = "bundle-balancer-replay") -> SparkSession:
    """A local (or ``master``; ``None``: the one spark-submit chose) session with Arrow on, no UI, UTC and the Kafka source jars.

    32 shuffle partitions, not 4: the audit's windows partition by log key and by bundle, a few
    dozen keys hash unevenly into 4 partitions and one core sorts the big one alone (a warm
    1M-event audit sorting 7 times: 6.1 s with 4, 5.1 s with 32; sorting twice, as it does now,
    2.4-3.2 s with 4 to 64, within the noise); adaptive execution coalesces them again where the
    data is small."""
    import pyspark
    from pyspark.sql import SparkSession

    jars = kafka_jars()
    check_jar_versions(jars, pyspark.__version__)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Workers import spark_replay, events and balancer: make the repository importable there.
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
