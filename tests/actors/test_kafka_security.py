"""kafka.security of cluster.yaml: parsed and checked at load, passwords only ever
read from a variable or a file, the aiokafka and Spark settings built from it, the ACL model."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from actors.cluster_conf import ClusterConf
from balancer.errors import ConfigError
from events.log.kafka_acls import grants
from events.log.kafka_client import Credentials, KafkaSecurity
from lbctl.kafka import principals
from lbctl.main import main

SECRET = "s3cr3t-Pa55"


def conf(security: object, **kafka: object) -> ClusterConf:
    return ClusterConf.from_mapping({"name": "prod", "kafka": {
        "bootstrap_servers": "k:9093", "security": security, **kafka}}, base=Path("/etc/bb"))


def test_no_security_is_plaintext_and_adds_no_client_arguments() -> None:
    found = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}})
    assert found.kafka.security.protocol == "PLAINTEXT"
    assert found.kafka.security.kwargs() == {} and found.kafka.security.spark_options() == {}


def test_sasl_ssl_with_roles_resolves_files_against_the_cluster_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found = conf({"protocol": "sasl_ssl", "mechanism": "SCRAM-SHA-256", "username": "bb-admin",
                  "password_env": "BB_PW", "ca_file": "certs/ca.pem",
                  "roles": {"leader": {"username": "bb-leader", "password_file": "leader.pw"}}})
    security = found.kafka.security
    assert (security.protocol, security.mechanism, security.cluster) == ("SASL_SSL", "SCRAM-SHA-256", "prod")
    assert security.ca_file == "/etc/bb/certs/ca.pem"
    leader = security.for_role("leader")
    assert leader.principal == "User:bb-leader" and leader.credentials is not None
    assert leader.credentials.password_file == "/etc/bb/leader.pw"
    assert security.for_role("broker").principal == "User:bb-admin"  # no role user: the file's
    monkeypatch.setenv("BB_PW", SECRET)
    assert SECRET not in repr(security) and SECRET not in str(pickle.dumps(security))


@pytest.mark.parametrize(("security", "named"), [
    ({"protocol": "TLS"}, "kafka.security.protocol = 'TLS'"),
    ({"protocol": "SASL_SSL", "mechanism": "GSSAPI", "username": "u", "password_env": "P"},
     "kafka.security.mechanism = 'GSSAPI'"),
    ({"protocol": "SASL_SSL"}, "kafka.security.username is needed"),
    ({"protocol": "SASL_SSL", "username": "u"}, "exactly one of password_env or password_file"),
    ({"protocol": "SASL_SSL", "username": "u", "password": SECRET}, "never write a password"),
    ({"protocol": "SSL", "cafile": "x"}, "'kafka.security.cafile'; did you mean 'ca_file'"),
    ({"protocol": "SASL_SSL", "username": "u", "password_env": "P", "roles": {"lead": {}}},
     "'kafka.security.roles.lead'; did you mean 'leader'"),
    ({"protocol": "SSL", "key_file": "k.pem"}, "key_file needs cert_file"),
])
def test_a_bad_security_setting_is_named(security: object, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        conf(security)
    assert named in raised.value.message and SECRET not in raised.value.message


def test_a_missing_password_names_its_variable_or_file_not_a_value(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BB_NOPE", raising=False)
    with pytest.raises(ConfigError, match="BB_NOPE"):
        Credentials("u", password_env="BB_NOPE").password()
    with pytest.raises(ConfigError, match=r"nope\.pw"):
        Credentials("u", password_file=str(tmp_path / "nope.pw")).password()
    (tmp_path / "u.pw").write_text(SECRET + "\n")
    assert Credentials("u", password_file=str(tmp_path / "u.pw")).password() == SECRET


def test_aiokafka_and_spark_get_the_same_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    monkeypatch.setenv("BB_PW", SECRET)
    security = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", Credentials("bb-audit", "BB_PW"),
                             ca_file=str(ca))
    kwargs = security.kwargs()
    assert kwargs == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_plain_username": "bb-audit", "sasl_plain_password": SECRET}
    spark = security.spark_options()
    assert spark["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert spark["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="bb-audit" password="{SECRET}";')
    tls = KafkaSecurity("SSL", ca_file=str(ca))
    assert tls.spark_options() == {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PEM",
                                   "kafka.ssl.truststore.location": str(ca)}


def test_the_acl_model_lets_writers_write_and_everyone_else_only_read() -> None:
    security = conf({"protocol": "SASL_SSL", "username": "bb-admin", "password_env": "P", "roles": {
        role: {"username": f"bb-{role}", "password_env": "P"}
        for role in ("leader", "namespace", "broker", "auditor")}}).kafka.security
    names = principals(security)
    assert names["clients"] == names["admin"] == "User:bb-admin"
    by_principal: dict[str, set[tuple[str, str, str]]] = {}
    for grant in grants("prod", names):
        for operation in grant.operations:
            by_principal.setdefault(grant.principal, set()).add((grant.resource, grant.name, operation))
    writes = {p for p, ops in by_principal.items() if ("topic", "prod-events", "Write") in ops}
    assert writes == {"User:bb-leader", "User:bb-namespace", "User:bb-broker"}
    assert by_principal["User:bb-auditor"] == {("topic", "prod-events", "Read"),
                                               ("topic", "prod-events", "Describe")}
    assert ("transactional-id", "prod-leader", "Write") in by_principal["User:bb-leader"]


def test_lbctl_kafka_acls_prints_one_command_per_grant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "cluster.yaml"
    file.write_text("name: prod\nkafka:\n  bootstrap_servers: k:9093\n  security:\n"
                    "    protocol: SASL_SSL\n    username: bb-admin\n    password_env: P\n"
                    "    roles: {leader: {username: bb-leader, password_file: l.pw}}\n")
    assert main(["kafka", "acls", "--cluster", str(file), "--command-config", "su.properties"]) == 0
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if not line.startswith("#")]
    assert all(c.startswith("kafka-acls.sh --bootstrap-server k:9093 --command-config su.properties --add")
               for c in commands)
    assert "--allow-principal User:bb-leader --operation Write --operation Describe " \
           "--transactional-id prod-leader" in out
    assert "no principal for auditor" in out


def test_every_aiokafka_client_is_made_by_kafka_client() -> None:
    """One place builds producers, consumers and admin clients (bootstrap, security, errors)."""
    root = Path(__file__).resolve().parents[2]
    made = [f"{path.relative_to(root)}: {name}"
            for package in ("actors", "bench", "events", "lbctl", "projections", "spark_replay")
            for path in (root / package).rglob("*.py") if path.name != "kafka_client.py"
            for name in ("AIOKafkaProducer(", "AIOKafkaConsumer(", "AIOKafkaAdminClient(")
            if name in path.read_text()]
    assert made == []


def test_lbctl_kafka_acls_works_on_the_shipped_cluster_file(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped conf/cluster.yaml names no Kafka user: its grants are the anonymous principal's."""
    shipped = Path(__file__).resolve().parents[2] / "conf" / "cluster.yaml"
    assert main(["kafka", "acls", "--cluster", str(shipped)]) == 0
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if not line.startswith("#")]
    assert commands and all("--allow-principal User:ANONYMOUS" in c for c in commands)
    assert "--topic lb-events" in out and "--transactional-id lb-leader" in out
    assert "names no Kafka user" in out and "no principal for" not in out
