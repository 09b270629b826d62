"""The admin verbs of contracts §4 on an in-process ``Cluster``: output, and bad input.

Bad input (an unknown namespace, bundle or broker, a split of an unsplittable bundle, a transfer
to the current owner, ...) is one line on stderr naming the bad value, exit status 2, nothing on
stdout, and nothing appended (the client refuses it before any actor sees it). A kept cluster (``lbctl run
--keep``) is found through ``--state-dir`` and restarted from its log by each verb.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from actors.cluster.kept import LOG_SUBDIR, ClusterSpec, write_spec
from actors.runtime import InProcessHost, run_sync
from balancer.errors import Unavailable
from balancer.ownership import BundleState
from events.catalog import CreateNamespace, SetNamespacePolicy
from events.log.local import LocalEventLog
from lbctl.attach import using
from lbctl.main import main
from tests.support.cluster_scenarios import (
    assert_consistent,
    bundles,
    call,
    make_host,
    owner,
    place_all,
    topic_in,
)

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")


@pytest.fixture
def host() -> Iterator[InProcessHost]:
    cluster = make_host()
    call(cluster, CreateNamespace, namespace="public/tiny", boundaries=[0, 1, 0xFFFFFFFF])
    place_all(cluster)
    with using(Cluster(InProcLink(cluster))):
        yield cluster
    assert_consistent(cluster)


def lbctl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def moved(host: InProcessHost, since: int) -> list[str]:
    return [r.envelope.type for r in host.records[since:] if r.envelope.type != "LoadReported"]


# -- output ---------------------------------------------------------------------------------------


def test_namespaces_bundles_as_a_table_and_as_json(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "namespaces", "bundles", "public/a")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["RANGE", "STATE", "OWNER", "VERSION"]
    assert len(lines) == 5
    first = bundles(host, "public/a")[0]
    assert lines[1].split()[:3] == [first.rsplit("/", 1)[1], "Owned", owner(host, first)]
    code, out, _ = lbctl(capsys, "namespaces", "bundles", "public/a", "--json")
    document = json.loads(out)
    assert document["numBundles"] == 4
    assert document["boundaries"] == ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]
    assert {b["state"] for b in document["bundles"]} == {"Owned"}


def test_namespaces_create_then_bundles(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "namespaces", "create", "public/new", "--bundles", "8")
    assert (code, out.strip()) == (0, "created public/new with 8 bundle(s)")
    code, out, _ = lbctl(capsys, "namespaces", "bundles", "public/new", "--json")
    assert json.loads(out)["numBundles"] == 8
    assert all(b["state"] == "Init" and b["owner"] is None for b in json.loads(out)["bundles"])


def test_split_bundle_with_unload_waits_for_the_split(host: InProcessHost,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    parent = bundles(host, "public/a")[0]
    src = owner(host, parent)
    code, out, _ = lbctl(capsys, "namespaces", "split-bundle", "public/a", "-b", "0x00000000_0x40000000",
                         "-san", "range_equally_divide", "-u")
    assert code == 0
    assert out.strip() == (f"split {parent} into 0x00000000_0x20000000, 0x20000000_0x40000000 "
                           f"(owner {src}); children unloaded")
    assert host.view.state(parent) is BundleState.DELETED
    assert bundles(host, "public/a")[:2] == ["public/a/0x00000000_0x20000000", "public/a/0x20000000_0x40000000"]


def test_split_largest_with_the_configured_default_algorithm(host: InProcessHost,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    host.advance(10_000)  # the namespace body learns each bundle's topics from the reports
    code, out, _ = lbctl(capsys, "namespaces", "split-bundle", "public/b", "-b", "LARGEST", "--json")
    assert code == 0
    done = json.loads(out)
    assert done["algorithm"] == "range_equally_divide" and len(done["children"]) == 2
    assert host.view.state(done["parent"]) is BundleState.DELETED


def test_unload_to_a_destination_is_a_transfer(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = bundles(host, "public/b")[1]
    src = owner(host, bundle)
    dst = next(b for b in sorted(host.client.brokers) if b != src)
    since = len(host.records)
    code, out, _ = lbctl(capsys, "namespaces", "unload", "public/b", "-b", bundle.rsplit("/", 1)[1], "-d", dst)
    assert (code, out.strip()) == (0, f"transferred {bundle} from {src} to {dst}")
    assert owner(host, bundle) == dst
    assert moved(host, since) == ["TransferPrepared", "BundleAssigned", "BundleOwned"]


def test_explain_names_who_asked_for_an_admin_move(host: InProcessHost,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: an operator's unload and transfer recorded no principal (only a pause did)."""
    from lbctl.admin_cluster import who
    from projections.explain import moves_of, render

    bundle = bundles(host, "public/b")[1]
    src = owner(host, bundle)
    dst = next(b for b in sorted(host.client.brokers) if b != src)
    assert lbctl(capsys, "namespaces", "unload", "public/b", "-b", bundle.rsplit("/", 1)[1], "-d", dst)[0] == 0
    story = render(bundle, moves_of(bundle, host.records))
    assert f"requested by: {who()}" in story and who().startswith("lbctl")


def test_every_admin_write_records_the_local_user(host: InProcessHost,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a split, a namespace's creation or policy, a failure domain and a whole namespace's
    unload recorded nobody (only a bundle's unload, a transfer and a pause did). Each local verb now names ``lbctl:<user>`` in its
    event; ``explain`` shows it on the split and ``log tail`` on every one of them."""
    from lbctl.admin_cluster import who
    from lbctl.log import item_line
    from projections.explain import moves_of, render

    since = len(host.records)
    parent = bundles(host, "public/a")[0]
    for argv in (("namespaces", "create", "public/asked", "--bundles", "2"),
                 ("namespaces", "split-bundle", "public/a", "-b", parent.rsplit("/", 1)[1],
                  "-san", "range_equally_divide"),
                 ("namespaces", "set-anti-affinity-group", "public/a", "--group", "g1"),
                 ("namespaces", "delete-anti-affinity-group", "public/a"),
                 ("clusters", "create-failure-domain", "--domain-name", "d1", "--broker-list", "broker-1"),
                 ("clusters", "delete-failure-domain", "--domain-name", "d1"),
                 ("namespaces", "unload", "public/b")):
        assert lbctl(capsys, *argv)[0] == 0, argv
    kinds = ("NamespaceCreated", "SplitRequested", "SplitCompleted", "NamespacePolicySet", "FailureDomainSet")
    written = [r for r in host.records[since:] if r.envelope.type in kinds]
    assert [r.envelope.type for r in written] == ["NamespaceCreated", "SplitRequested", "SplitCompleted",
                                                  "NamespacePolicySet", "NamespacePolicySet",
                                                  "FailureDomainSet", "FailureDomainSet"]
    assert who().startswith("lbctl") and {r.envelope.payload["by"] for r in written} == {who()}
    assert all(item_line(r, False).endswith(f"\tby={who()}") for r in written)
    assert f"requested by: {who()}" in render(parent, moves_of(parent, host.records))
    unloaded = [r for r in host.records[since:] if r.envelope.type == "UnloadRequested"]
    assert len(unloaded) == 4 and {r.envelope.payload["decision"]["requested_by"] for r in unloaded} == {who()}


def test_unload_a_bundle_and_a_namespace(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = bundles(host, "public/a")[2]
    src = owner(host, bundle)
    code, out, _ = lbctl(capsys, "namespaces", "unload", "public/a", "-b", bundle.rsplit("/", 1)[1])
    assert (code, out.strip()) == (0, f"unloaded {bundle} from {src}")
    code, out, _ = lbctl(capsys, "namespaces", "unload", "public/b", "--json")
    assert code == 0
    assert sorted(m["bundle"] for m in json.loads(out)["unloaded"]) == bundles(host, "public/b")
    released = {r.envelope.payload["bundle"] for r in host.events("BundleReleased")}
    assert set(bundles(host, "public/b")) <= released


def test_anti_affinity_group_keeps_the_isolation_policy(host: InProcessHost,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    isolation = {"primary": ["broker-1"], "secondary": [], "min_limit": 1}
    call(host, SetNamespacePolicy, namespace="public/a", isolation=isolation)
    code, out, _ = lbctl(capsys, "namespaces", "set-anti-affinity-group", "public/a", "--group", "g1")
    assert (code, out.strip()) == (0, "public/a: anti-affinity group g1")
    info = host.view.namespaces["public/a"]
    assert info.anti_affinity_group == "g1" and info.isolation == isolation


def test_failure_domain(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lbctl(capsys, "clusters", "create-failure-domain", "standalone", "--domain-name", "d1",
                         "--broker-list", "broker-1,broker-2")
    assert (code, out.strip()) == (0, "failure domain d1: broker-1, broker-2")
    assert host.view.failure_domains == {"broker-1": "d1", "broker-2": "d1"}
    code, out, _ = lbctl(capsys, "brokers", "list", "--json")
    domains = {b["broker"]: b["failureDomain"] for b in json.loads(out)["brokers"]}
    assert domains == {"broker-1": None, "broker-2": None, "broker-3": None}  # registration's domain


def test_pulsar_admin_spellings_and_the_added_verbs(host: InProcessHost,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert lbctl(capsys, "namespaces", "create", "public/c", "-b", "2")[:2] == (0, "created public/c with 2 bundle(s)\n")
    assert lbctl(capsys, "namespaces", "set-anti-affinity-group", "public/c", "-g", "g3")[0] == 0
    assert lbctl(capsys, "namespaces", "get-anti-affinity-group", "public/c")[1].strip() == "g3"
    assert lbctl(capsys, "namespaces", "delete-anti-affinity-group", "public/c")[0] == 0
    assert host.view.namespaces["public/c"].anti_affinity_group is None
    lbctl(capsys, "clusters", "create-failure-domain", "--domain-name", "d1", "--broker-list", "broker-1")
    code, out, _ = lbctl(capsys, "clusters", "list-failure-domains", "standalone", "--json")
    assert (code, json.loads(out)) == (0, {"d1": {"brokers": ["broker-1"]}})
    assert lbctl(capsys, "clusters", "get-failure-domain", "--domain-name", "d1")[1].strip() == "broker-1"
    code, _, err = lbctl(capsys, "clusters", "create-failure-domain", "--domain-name", "d2",
                         "--broker-list", "broker-1")
    assert code == 1 and "broker-1" in err and "d1" in err  # another domain holds it: refused
    assert lbctl(capsys, "clusters", "delete-failure-domain", "--domain-name", "d1")[0] == 0
    assert host.view.failure_domains == {}
    assert lbctl(capsys, "clusters", "get-failure-domain", "--domain-name", "d1")[0] == 2
    assert lbctl(capsys, "brokers", "leader-broker")[1].strip() == "leader (epoch 1)"
    parent = bundles(host, "public/a")[0].rsplit("/", 1)[1]
    code, out, _ = lbctl(capsys, "namespaces", "split-bundle", "public/a", "-b", parent,
                         "-san", "specified_positions_divide", "-sb", "0x10000000")
    assert code == 0 and "0x10000000" in out
    host.advance(10_000)
    code, out, _ = lbctl(capsys, "broker-stats", "load-report")
    assert code == 0 and json.loads(out)["pulsarServiceUrl"] == "pulsar://broker-1:6650"


def test_topics_lookup_assigns_an_unowned_bundle(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    call(host, CreateNamespace, namespace="public/fresh", bundles=2)
    code, out, _ = lbctl(capsys, "topics", "lookup", "persistent://public/fresh/orders", "--json")
    assert code == 0
    found = json.loads(out)
    assert found["broker"] == host.view.lookup("persistent://public/fresh/orders")
    assert found["brokerUrl"] == f"pulsar://{found['broker']}:6650"
    topic = topic_in(host, bundles(host, "public/a")[0])
    served_by = owner(host, bundles(host, "public/a")[0])
    code, out, _ = lbctl(capsys, "topics", "lookup", topic)
    assert (code, out) == (0, f"pulsar://{served_by}:6650\n")  # as pulsar-admin prints it
    code, out, _ = lbctl(capsys, "topics", "lookup", topic, "--table")
    assert out == f"{served_by}\tpulsar://{served_by}:6650\n"


def test_brokers_list_and_load_report(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.advance(10_000)
    code, out, _ = lbctl(capsys, "brokers", "list")
    assert (code, out) == (0, "broker-1\nbroker-2\nbroker-3\n")  # one per line, as pulsar-admin
    code, out, _ = lbctl(capsys, "brokers", "list", "--table")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["BROKER", "URL", "DOMAIN", "BUNDLES", "LOAD"]
    assert [line.split()[0] for line in lines[1:4]] == ["broker-1", "broker-2", "broker-3"]
    assert sum(int(line.split()[3]) for line in lines[1:4]) == len(host.view.owners())
    assert lines[-1] == "leader: leader (epoch 1)"
    code, out, _ = lbctl(capsys, "broker-stats", "load-report", "broker-2")
    report = json.loads(out)  # Pulsar's LocalBrokerData, camelCase
    assert code == 0 and report["pulsarServiceUrl"] == "pulsar://broker-2:6650"
    assert report["bundles"] == sorted(b for b, o in host.view.owners().items() if o == "broker-2")
    assert set(report["lastStats"]) == set(report["bundles"]) and report["numBundles"] >= 0


# -- bad input -----------------------------------------------------------------------------------

BAD: dict[str, tuple[list[str], str]] = {
    # case: (argv, the bad value the message must name)
    "unknown_namespace": (["namespaces", "unload", "public/nope"], "public/nope"),
    "unknown_namespace_read": (["namespaces", "bundles", "public/nope"], "public/nope"),
    "not_a_namespace": (["namespaces", "bundles", "nope"], "nope"),
    "unknown_bundle": (["namespaces", "unload", "public/a", "-b", "0x00000000_0x20000000"],
                       "0x00000000_0x20000000"),
    "not_a_range": (["namespaces", "unload", "public/a", "-b", "0x0000zz00_0x40000000"],
                    "0x0000zz00_0x40000000"),
    "unknown_broker": (["namespaces", "unload", "public/a", "-b", "0x00000000_0x40000000", "-d", "broker-9"],
                       "broker-9"),
    "unsplittable": (["namespaces", "split-bundle", "public/tiny", "-b", "0x00000000_0x00000001"],
                     "0x00000000_0x00000001"),
    "unknown_algorithm": (["namespaces", "split-bundle", "public/a", "-b", "LARGEST", "-san", "halve_it"],
                          "halve_it"),
    "namespace_exists": (["namespaces", "create", "public/a"], "public/a"),
    "domain_unknown_broker": (["clusters", "create-failure-domain", "--domain-name", "d1",
                               "--broker-list", "broker-1,nope"], "nope"),
    "lookup_unknown_namespace": (["topics", "lookup", "persistent://public/nope/t"], "public/nope"),
    "load_report_unknown_broker": (["broker-stats", "load-report", "broker-7"], "broker-7"),
    "destination_without_bundle": (["namespaces", "unload", "public/a", "-d", "broker-2"], "broker-2"),
    "bad_split_boundaries": (["namespaces", "split-bundle", "public/a", "-b", "LARGEST",
                              "--split-boundaries", "x1"], "x1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_appends_nothing(
        case: str, host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    argv, bad_value = BAD[case]
    snapshot = host.view.snapshot()
    since = len(host.records)
    code, out, err = lbctl(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("lbctl: error: ") and bad_value in err
    assert moved(host, since) == []
    snapshot["tracker"] = host.view.snapshot()["tracker"]
    assert host.view.snapshot() == snapshot


def test_transfer_to_the_current_owner_is_refused(host: InProcessHost, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = bundles(host, "public/a")[0]
    current = owner(host, bundle)
    since = len(host.records)
    code, out, err = lbctl(capsys, "namespaces", "unload", "public/a", "-b", bundle.rsplit("/", 1)[1],
                           "-d", current)
    assert (code, out) == (2, "")
    assert err.strip() == f"lbctl: error: {bundle} is already owned by {current}; choose another destination"
    assert moved(host, since) == []
    assert owner(host, bundle) == current


def test_no_kept_cluster_names_the_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lbctl(capsys, "namespaces", "bundles", "public/a", "--state-dir", str(tmp_path))
    assert code == 2 and out == "" and str(tmp_path) in err and len(err.splitlines()) == 1


# -- a kept cluster, restarted from its log by each verb -----------------------------------------------


def test_a_kept_inproc_cluster_serves_the_verbs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    code, out, _ = lbctl(capsys, "run", "--host", "inproc", "--conf", CONF, "--minutes", "2", "--speed", "0",
                         "--topics", "200", "--bundles", "4", "--keep", "--state-dir", state, "--plain")
    assert code == 0 and "kept:" in out
    code, out, _ = lbctl(capsys, "namespaces", "bundles", "public/default", "--json", "--state-dir", state)
    rows = json.loads(out)["bundles"]
    owned = next(r for r in rows if r["state"] == "Owned")
    dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owned["owner"])
    code, out, _ = lbctl(capsys, "namespaces", "unload", "public/default", "-b", owned["range"], "-d", dst,
                         "--state-dir", state)
    assert (code, out.strip()) == (0, f"transferred public/default/{owned['range']} from {owned['owner']} to {dst}")
    log = tmp_path / "state" / "log"
    before = _types(log)
    code, out, err = lbctl(capsys, "namespaces", "unload", "public/default", "-b", owned["range"], "-d", dst,
                           "--state-dir", state)
    assert (code, out) == (2, "") and dst in err
    # The verb's restart re-elects a leader and brokers report; the refused command adds nothing.
    assert set(_types(log)[len(before):]) <= {"LeaderElected", "LoadReported", "SheddingSkipped"}
    code, out, _ = lbctl(capsys, "namespaces", "bundles", "public/default", "--json", "--state-dir", state)
    assert next(r for r in json.loads(out)["bundles"] if r["range"] == owned["range"])["owner"] == dst


def test_log_tail_and_explain_of_a_kept_cluster_name_who_asked(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from lbctl.admin_cluster import who

    state = str(tmp_path / "state")
    assert lbctl(capsys, "run", "--host", "inproc", "--conf", CONF, "--minutes", "1", "--speed", "0",
                 "--topics", "50", "--bundles", "2", "--keep", "--state-dir", state, "--plain")[0] == 0
    assert lbctl(capsys, "topics", "lookup", "persistent://public/default/topic-00001", "--state-dir", state)[0] == 0
    code, out, _ = lbctl(capsys, "namespaces", "split-bundle", "public/default", "-b", "LARGEST", "--json",
                         "--state-dir", state)
    assert code == 0
    parent = json.loads(out)["parent"]
    assert lbctl(capsys, "clusters", "create-failure-domain", "--domain-name", "d1", "--broker-list", "broker-1",
                 "--state-dir", state)[0] == 0
    code, out, _ = lbctl(capsys, "explain", parent, "--state-dir", state)
    assert code == 0 and f"requested by: {who()}" in out
    code, out, _ = lbctl(capsys, "log", "tail", "--log-dir", str(tmp_path / "state" / LOG_SUBDIR))
    lines = [line for line in out.splitlines() if f"\tby={who()}" in line]
    assert [line.split("\t")[1] for line in lines] == ["SplitRequested v3", "SplitCompleted v2",
                                                       "FailureDomainSet v2"]
    assert "NamespaceCreated v2" in out and "by=" not in next(  # the run's own namespace: nobody asked
        line for line in out.splitlines() if "NamespaceCreated" in line)


def test_a_kept_cluster_is_used_by_one_process_at_a_time(tmp_path: Path) -> None:
    spec = ClusterSpec(host="inproc", conf=CONF, topics=50)
    write_spec(tmp_path, spec)

    async def go() -> None:
        first = await Cluster.start(CONF, spec.brokers, host="inproc", workload=spec.workload(),
                                    clients=True, log_dir=tmp_path / LOG_SUBDIR)
        try:
            with pytest.raises(Unavailable, match="in use by another lbctl process"):
                await Cluster.connect(state_dir=tmp_path)
        finally:
            await first.close()
        await (await Cluster.connect(state_dir=tmp_path)).close()

    asyncio.run(go())


def _types(log_dir: Path) -> list[str]:
    log = LocalEventLog(log_dir, fsync=False)
    try:
        return [r.envelope.type for r in run_sync(log.read()).records]
    finally:
        run_sync(log.close())
