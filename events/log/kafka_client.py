"""Every aiokafka client the project makes, in one place: bootstrap servers, security, errors.

``KafkaSecurity`` is ``kafka.security`` of ``conf/cluster.yaml``: the protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), the SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), whose
credentials (``Credentials``: a username and where its password is: an environment variable or
a file), the CA file and the client certificate and key; ``roles`` gives the actors of a kind
(leader, namespace, broker, clients) their own credentials. ``producer``, ``consumer`` and
``admin`` build aiokafka clients with them; ``started`` starts one and turns a refusal into one
line.

Invariants:
- a password is never stored here, nor in any spec that is pickled, logged or shipped to Ray:
  only the name of its variable or the path of its file, read when a client is made;
- PLAINTEXT with no settings is exactly what the project did before: ``bootstrap_servers`` only;
- a wrong password, an untrusted certificate or a refused ACL is a ``KafkaRefused`` (an
  ``InvalidInput``: ``lbctl`` prints its one line and exits 2) naming the cluster, the bootstrap
  servers, the principal and what was refused; it is never retried (retrying cannot help);
- Spark's Kafka source gets the same settings as ``kafka.*`` options (``spark_options``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedSaslMechanismError,
)

from balancer.errors import ConfigError, InvalidInput, Unavailable

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ROLES = ("leader", "namespace", "broker", "clients")
"""The actors' kinds that may have credentials of their own (``kafka.security.roles``)."""

DENIED = (TopicAuthorizationFailedError, GroupAuthorizationFailedError,
          ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailed)
"""Kafka's answers to a request an ACL refuses."""
UNAUTHENTICATED = (SaslAuthenticationFailed, AuthenticationFailedError, UnsupportedSaslMechanismError,
                   ssl.SSLError)

_JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

C = TypeVar("C", AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient)


class KafkaRefused(InvalidInput):
    """Kafka refused us: authentication failed, the certificate is not trusted, or an ACL."""

    code = "kafka_refused"


@dataclass(frozen=True, slots=True)
class Credentials:
    """A SASL user; the password is read from ``password_env`` or ``password_file`` on use."""

    username: str
    password_env: str | None = None
    password_file: str | None = None

    def password(self) -> str:
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if not value:
                raise ConfigError(f"Kafka user {self.username!r}: environment variable "
                                  f"{self.password_env} (its password) is not set", value=self.password_env)
            return value
        if self.password_file is not None:
            try:
                return Path(self.password_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"Kafka user {self.username!r}: password file "
                                  f"{self.password_file!r}: {exc.strerror}", value=self.password_file) from None
        raise ConfigError(f"Kafka user {self.username!r}: no password_env or password_file",
                          value=self.username)


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """How to reach a Kafka cluster (``kafka.security`` of ``conf/cluster.yaml``)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    credentials: Credentials | None = None
    """This process's user (lbctl's verbs, replays, ``Cluster.connect``)."""
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    roles: tuple[tuple[str, Credentials], ...] = ()
    """Role -> the credentials of the actors of that kind (a tuple: frozen and picklable)."""
    cluster: str = "lb"
    """The cluster's name, for messages."""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @property
    def principal(self) -> str:
        """Who Kafka will see (as its ACLs name it)."""
        if self.sasl:
            return f"User:{self.credentials.username}" if self.credentials else "no SASL user"
        if self.tls and self.cert_file:
            return f"the subject of {self.cert_file}"
        return "User:ANONYMOUS"

    def for_role(self, role: str | None) -> KafkaSecurity:
        """The settings an actor of kind ``role`` uses: its role's credentials, if it has some."""
        found = dict(self.roles).get(role or "")
        return self if found is None else replace(self, credentials=found)

    def kwargs(self) -> dict[str, Any]:
        """The aiokafka keyword arguments (none for PLAINTEXT)."""
        if self.protocol == "PLAINTEXT":
            return {}
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            out["ssl_context"] = self.ssl_context()
        if self.sasl:
            if self.credentials is None:
                raise KafkaRefused(f"Kafka cluster {self.cluster!r}: protocol {self.protocol} needs "
                                   "a username (kafka.security.username)", value=self.protocol)
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.credentials.username,
                       sasl_plain_password=self.credentials.password())
        return out

    def ssl_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            named = self.ca_file or self.cert_file or "the system's CA store"
            raise ConfigError(f"Kafka cluster {self.cluster!r}: cannot load {named!r}: {exc}",
                              value=named) from None
        return context

    def spark_options(self) -> dict[str, str]:
        """The same settings as Spark Kafka source options (``kafka.*``)."""
        if self.protocol == "PLAINTEXT":
            return {}
        out = {"kafka.security.protocol": self.protocol}
        if self.tls and self.ca_file:
            out.update({"kafka.ssl.truststore.type": "PEM",
                        "kafka.ssl.truststore.location": str(Path(self.ca_file).resolve())})
        if self.tls and self.cert_file:
            out.update({"kafka.ssl.keystore.type": "PEM",
                        "kafka.ssl.keystore.certificate.chain": Path(self.cert_file).read_text(),
                        "kafka.ssl.keystore.key": Path(self.key_file or self.cert_file).read_text()})
        if self.sasl:
            if self.credentials is None:
                raise KafkaRefused(f"Kafka cluster {self.cluster!r}: protocol {self.protocol} needs "
                                   "a username (kafka.security.username)", value=self.protocol)
            user, secret = self.credentials.username, self.credentials.password()
            out.update({"kafka.sasl.mechanism": self.mechanism,
                        "kafka.sasl.jaas.config": f'{_JAAS[self.mechanism]} required '
                                                  f'username="{_quoted(user)}" password="{_quoted(secret)}";'})
        return out


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


PLAINTEXT = KafkaSecurity()


def producer(bootstrap: str, security: KafkaSecurity | None = None, **options: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers=bootstrap, **(security or PLAINTEXT).kwargs(), **options)


def consumer(bootstrap: str, security: KafkaSecurity | None = None, **options: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, **(security or PLAINTEXT).kwargs(), **options)


def admin(bootstrap: str, security: KafkaSecurity | None = None, **options: Any) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(bootstrap_servers=bootstrap, **(security or PLAINTEXT).kwargs(), **options)


async def started(client: C, bootstrap: str, security: KafkaSecurity | None, what: str) -> C:
    """``client`` started; a failure is stopped and raised as ``KafkaRefused`` (refused) or
    ``Unavailable`` (not reachable), naming ``what`` the client was for."""
    try:
        await client.start()
        return client
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
        if isinstance(exc, Exception):
            raise await explain(exc, bootstrap, security, what) from None
        raise


async def stop_producer(producer: AIOKafkaProducer, timeout_s: float = 5.0) -> None:
    """Stop ``producer`` within ``timeout_s``. aiokafka's stop first waits for every pending
    batch, and one that can never go (no producer id, a transaction Kafka will not end) would
    hold the caller for good: past the bound the batches fail and the sender and connections
    close unflushed (nothing in them was acknowledged, so nothing acknowledged is lost)."""
    try:
        async with asyncio.timeout(timeout_s):
            await producer.stop()
        return
    except Exception:  # the bound, or a failure while flushing: close it the hard way
        pass
    with contextlib.suppress(Exception):
        producer._message_accumulator.fail_all(KafkaError("the producer was dropped"))
    with contextlib.suppress(Exception):
        await producer._sender.close()
    with contextlib.suppress(Exception):
        await producer.client.close()


async def explain(exc: BaseException, bootstrap: str, security: KafkaSecurity | None,
                  what: str) -> InvalidInput | Unavailable:
    """The project's error for a Kafka failure: ``KafkaRefused`` if Kafka refused us (found by
    one more connection when aiokafka only says it could not bootstrap), else ``Unavailable``."""
    security = security or PLAINTEXT
    if isinstance(exc, KafkaRefused | Unavailable | ConfigError):
        return exc
    if isinstance(exc, DENIED):
        return refused(exc, bootstrap, security, what)
    if isinstance(exc, KafkaConnectionError):
        cause = await _connect_once(bootstrap, security)
        if isinstance(cause, UNAUTHENTICATED):
            return refused(cause, bootstrap, security, what)
        if cause is not None and not security.tls and await _speaks_tls(bootstrap):
            return KafkaRefused(
                f"Kafka cluster {security.cluster!r} at {bootstrap} refused {security.principal} to "
                f"{what}: the listener wants TLS and credentials, this client uses {security.protocol} "
                "(set kafka.security)", value=security.protocol)
    return Unavailable(f"Kafka cluster {security.cluster!r} at {bootstrap}: {what}: {exc!r}")


def refused(exc: BaseException, bootstrap: str, security: KafkaSecurity, what: str) -> KafkaRefused:
    """One line: the cluster, its servers, the principal and what was refused."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = f"the broker's certificate is not trusted ({exc.verify_message}; ca_file={security.ca_file})"
    elif isinstance(exc, ssl.SSLError):
        why = f"the TLS handshake failed ({exc.reason})"
    elif isinstance(exc, SaslAuthenticationFailed | AuthenticationFailedError):
        why = f"authentication failed ({security.mechanism}: wrong username or password)"
    elif isinstance(exc, UnsupportedSaslMechanismError):
        why = f"the broker does not accept SASL mechanism {security.mechanism}"
    else:
        why = f"not authorized ({type(exc).__name__}: an ACL refuses it)"
    return KafkaRefused(f"Kafka cluster {security.cluster!r} at {bootstrap} refused "
                        f"{security.principal} to {what}: {why}", value=security.principal)


async def _connect_once(bootstrap: str, security: KafkaSecurity) -> BaseException | None:
    """Open one connection to the first bootstrap server: the error it ends with, if any."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    kwargs = security.kwargs()
    kwargs.pop("security_protocol", None)
    try:
        async with asyncio.timeout(10):
            conn = await create_conn(host.strip("[]"), int(port), security_protocol=security.protocol,
                                     **kwargs)
        conn.close()
        return None
    except Exception as exc:
        return exc


async def _speaks_tls(bootstrap: str) -> bool:
    """True if the first bootstrap server completes a TLS handshake (certificate unchecked)."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        async with asyncio.timeout(5):
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port), ssl=context)
        writer.close()
        return True
    except (OSError, TimeoutError):
        return False


def for_cluster(security: KafkaSecurity | None, cluster: str) -> KafkaSecurity:
    """``security`` (or plain text) naming ``cluster`` in its messages."""
    return replace(security or PLAINTEXT, cluster=cluster)


async def check_readable(bootstrap: str, topics: list[str], security: KafkaSecurity | None) -> None:
    """Log in and fetch once from each topic's first partition: a refusal is one
    ``KafkaRefused`` now (before a Spark job would retry it for a minute)."""
    security = security or PLAINTEXT
    what = f"read {', '.join(topics)}"
    reader = await started(consumer(bootstrap, security, enable_auto_commit=False), bootstrap,
                           security, what)
    try:
        async with asyncio.timeout(30):
            tps = [TopicPartition(topic, 0) for topic in topics]
            reader.assign(tps)
            await reader.seek_to_beginning(*tps)
            await reader.getmany(*tps, timeout_ms=500, max_records=1)
    except DENIED as exc:
        raise refused(exc, bootstrap, security, what) from None
    except (KafkaError, OSError, TimeoutError) as exc:
        raise Unavailable(f"Kafka cluster {security.cluster!r} at {bootstrap}: {what}: {exc!r}") from exc
    finally:
        await reader.stop()
