"""A SASL_SSL listener for the test broker of ``tests/kafka_server.py``: certificates, SCRAM
users, the KRaft authorizer, and each role's ACLs.

``SecureSetup(directory)`` makes, with ``cryptography``:
- a CA and the broker's certificate for 127.0.0.1/localhost (``ca.pem``, ``broker.pem``: key and
  chain, a PEM keystore), and a second CA nobody trusts (``rogue-ca.pem``);
- one SCRAM-SHA-512 user per role (``USERS``) with a random password, each in its own file
  (``<user>.password``, mode 0600), created when the storage is formatted (``--add-scram``);
- ``fixture``: the super user (``super.users``) the tests use to create ACLs (``acl_config``).

The broker runs ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``: a principal may do
only what an ACL allows it. The controller listener stays PLAINTEXT on 127.0.0.1 (its principal,
User:ANONYMOUS, is a super user so the broker can talk to its own controller).
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from events.log.kafka_client import Credentials, KafkaSecurity

MECHANISM = "SCRAM-SHA-512"
SUPER_USER = "fixture"
USERS = {"leader": "bb-leader", "namespace": "bb-namespace", "broker": "bb-broker",
         "clients": "bb-clients", "admin": "bb-admin", "auditor": "bb-auditor"}
"""Role -> its SCRAM user."""
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
                 issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certificates(directory: Path, server_cn: str = "127.0.0.1") -> dict[str, Path]:
    """ca.pem, broker.pem (key + chain), broker-cert.pem, broker-key.pem, rogue-ca.pem."""
    ca_key, rogue_key, key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = _certificate("bundle-balancer test CA", ca_key, "bundle-balancer test CA", ca_key, ca=True)
    rogue = _certificate("nobody's CA", rogue_key, "nobody's CA", rogue_key, ca=True)
    cert = _certificate(server_cn, key, "bundle-balancer test CA", ca_key, ca=False)
    files = {"ca": directory / "ca.pem", "broker": directory / "broker.pem",
             "cert": directory / "broker-cert.pem", "key": directory / "broker-key.pem",
             "rogue": directory / "rogue-ca.pem"}
    files["ca"].write_bytes(_pem(ca))
    files["rogue"].write_bytes(_pem(rogue))
    files["cert"].write_bytes(_pem(cert) + _pem(ca))
    files["key"].write_bytes(_key_pem(key))
    files["broker"].write_bytes(_key_pem(key) + _pem(cert) + _pem(ca))
    for path in (files["key"], files["broker"]):
        path.chmod(0o600)
    return files


class SecureSetup:
    """Certificates, users and broker properties of one secured test broker."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.files = make_certificates(directory)
        self.passwords = {user: secrets.token_urlsafe(18) for user in (*USERS.values(), SUPER_USER)}
        for user, password in self.passwords.items():
            path = self.password_file(user)
            path.write_text(password)
            path.chmod(0o600)

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def properties(self, broker_port: int, controller_port: int) -> dict[str, str]:
        """What replaces the PLAINTEXT listener in server.properties."""
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{SUPER_USER}" password="{self.passwords[SUPER_USER]}";')
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{broker_port}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.files["broker"]),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.files["ca"]),
            "ssl.client.auth": "none",
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{SUPER_USER};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }

    def format_args(self) -> list[str]:
        """SCRAM credentials written into the metadata log at format time."""
        args: list[str] = []
        for user, password in self.passwords.items():
            args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
        return args

    def security(self, user: str = SUPER_USER, *, ca: Path | None = None, cluster: str = "lb",
                 password_env: str | None = None) -> KafkaSecurity:
        """A client's settings as ``user`` (its password file, or ``password_env``)."""
        credentials = Credentials(user, password_env=password_env,
                                  password_file=None if password_env else str(self.password_file(user)))
        return KafkaSecurity(protocol="SASL_SSL", mechanism=MECHANISM, credentials=credentials,
                             ca_file=str(ca or self.files["ca"]), cluster=cluster)

    def acl_config(self) -> Path:
        """A Java client properties file as the super user (``kafka-acls --command-config``)."""
        path = self.directory / "fixture-client.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={MECHANISM}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SUPER_USER}" password="{self.passwords[SUPER_USER]}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.files['ca']}\n")
        path.chmod(0o600)
        return path

    def env(self) -> dict[str, str]:
        """BB_KAFKA_PASSWORD_<ROLE> for every role (for files that use password_env)."""
        return {f"BB_KAFKA_PASSWORD_{role.upper()}": self.passwords[user] for role, user in USERS.items()}


def secret_values(setup: SecureSetup) -> list[str]:
    """Every password (what must appear in no log, report or message)."""
    return list(setup.passwords.values())
