"""What each JVM of the real Pulsar test cluster is told (tests/pulsar_server.py starts them).

Invariants: every process binds 127.0.0.1 only; brokers run one bookie's quorum (1/1/1), report
load fast and by throughput only, and make no move of their own (shedding and automatic splits
off) unless a test's overrides turn them on. The values are Pulsar 4.0.7's keys; a key Pulsar
does not know is ignored by it, so each one here was checked against ServiceConfiguration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

LoadManagerKind = Literal["extensible", "modular"]
LOAD_MANAGERS: dict[str, dict[str, str]] = {
    "extensible": {
        "loadManagerClassName":
            "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy":
            "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder",
    },
    "modular": {
        "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy":
            "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
    },
}

# What Pulsar's bin/pulsar opens on JDK 17: without them a broker fails to read the machine's
# usage (IllegalAccessException in LinuxInfoUtils) and Netty/BookKeeper lose their fast paths.
ADD_OPENS = (
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.platform=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
)  # fmt: skip
COMMON_PROPS = (
    "-Djava.net.preferIPv4Stack=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djute.maxbuffer=10485760",
    "-Dzookeeper.4lw.commands.whitelist=ruok,dump",
    "-Dzookeeper.snapshot.trust.empty=true",
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
)
# C1 only: the JIT's second tier costs seconds of CPU at start on 2 cores and buys nothing here.
FAST_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
HEAP = {
    "zookeeper": ("-Xmx128m", "-Xms32m"),
    "setup": ("-Xmx256m",),
    "bookie": ("-Xmx256m", "-XX:MaxDirectMemorySize=256m"),
    "broker": ("-Xmx768m", "-Xms128m", "-XX:MaxDirectMemorySize=512m"),
}
JVM_FLAGS = (*ADD_OPENS, *COMMON_PROPS)


def write_props(path: Path, props: dict[str, Any]) -> None:
    """A Java properties file; booleans as `true`/`false`."""
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    path.write_text("".join(f"{key}={text(value)}\n" for key, value in props.items()))


@dataclass(frozen=True)
class BrokerPorts:
    web: int
    service: int

    @property
    def broker_id(self) -> str:
        return f"127.0.0.1:{self.web}"


def zookeeper_conf(port: int, home: Path) -> dict[str, Any]:
    """zoo.cfg of a standalone ZooKeeper on 127.0.0.1, no admin server, no purging."""
    return {
        "tickTime": 2000, "dataDir": home / "data", "clientPort": port,
        "clientPortAddress": "127.0.0.1", "admin.enableServer": False,
        "maxClientCnxns": 0, "autopurge.purgeInterval": 0,
    }


def broker_conf(cluster: str, metadata_store: str, ports: BrokerPorts,
                session_timeout_ms: int) -> dict[str, Any]:
    """broker.conf of a test broker: 127.0.0.1 only, one bookie, fast and throughput-only load
    reports, no moves of Pulsar's own unless a test turns them on."""
    return {
        "clusterName": cluster,
        "metadataStoreUrl": metadata_store,
        "configurationMetadataStoreUrl": metadata_store,
        "metadataStoreSessionTimeoutMillis": session_timeout_ms,
        "brokerServicePort": ports.service,
        "webServicePort": ports.web,
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        "managedLedgerDefaultEnsembleSize": 1,
        "managedLedgerDefaultWriteQuorum": 1,
        "managedLedgerDefaultAckQuorum": 1,
        "transactionCoordinatorEnabled": False,
        "functionsWorkerEnabled": False,
        "webSocketServiceEnabled": False,
        "brokerShutdownTimeoutMs": 3000,
        # Every broker on one machine reports the same machine-wide CPU and memory: only
        # throughput tells them apart.
        "loadBalancerCPUResourceWeight": 0,
        "loadBalancerMemoryResourceWeight": 0,
        "loadBalancerDirectMemoryResourceWeight": 0,
        # Load reports every second when they change, at least every minute when idle; topic
        # and bundle rates recomputed every 5 s (60 s by default) so reports follow traffic.
        "loadBalancerReportUpdateMinIntervalMillis": 1000,
        "loadBalancerReportUpdateMaxIntervalMinutes": 1,
        "statsUpdateFrequencyInSecs": 5,
        "statsUpdateInitialDelayInSecs": 5,
        "loadBalancerAutoBundleSplitEnabled": False,
        "loadBalancerSheddingEnabled": False,
    }


def bookie_conf(port: int, zk_port: int, home: Path) -> dict[str, Any]:
    """bookie.conf of the one test bookie: loopback only, small caches, no fsync, no extras."""
    return {
        "bookiePort": port,
        "listeningInterface": "lo",
        "allowLoopback": True,
        "advertisedAddress": "127.0.0.1",
        "useHostNameAsBookieID": False,
        "metadataServiceUri": f"zk://127.0.0.1:{zk_port}/ledgers",
        "journalDirectories": home / "journal",
        "ledgerDirectories": home / "ledgers",
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "dbStorage_writeCacheMaxSizeMb": 16,
        "dbStorage_readAheadCacheMaxSizeMb": 16,
        "dbStorage_rocksDB_blockCacheSize": 16 * 1024 * 1024,
        "journalSyncData": False,
        "journalPreAllocSizeMB": 4,
        "logSizeLimit": 64 * 1024 * 1024,
        "httpServerEnabled": False,
        "autoRecoveryDaemonEnabled": False,
        "diskUsageThreshold": 0.99,
        "diskUsageWarnThreshold": 0.98,
    }
