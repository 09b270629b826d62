"""``kafka.security`` of ``conf/cluster.yaml`` -> ``KafkaSecurity`` (events.log.kafka_client).

    kafka:
      security:
        protocol: SASL_SSL              # PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
        mechanism: SCRAM-SHA-512        # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
        username: bb-admin              # who this file's user is (lbctl verbs, replay, log)
        password_env: BB_ADMIN_PASSWORD # or password_file: (never the password itself)
        ca_file: certs/ca.pem           # trust this CA (PEM); else the system's
        cert_file: certs/client.pem     # a client certificate (mutual TLS), with key_file
        key_file: certs/client.key
        roles:                          # the actors' own principals (`lbctl run`)
          leader: {username: bb-leader, password_file: /run/secrets/bb-leader}

Invariants: every key is checked at load (an unknown one is named, with the closest valid
key); SASL needs a username and exactly one of password_env / password_file, for the file's
user and for every role; a password written in the file is refused (it would be read by
everyone who reads the file); files are resolved against the cluster file's folder.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from balancer.errors import ConfigError
from events.log.kafka_client import MECHANISMS, PROTOCOLS, ROLES, Credentials, KafkaSecurity

ACL_ROLES = (*ROLES, "admin", "auditor")
"""Roles a file may name: the actors' kinds, and the admin's and auditor's principals (for
``lbctl kafka acls``)."""
_KEYS = ("protocol", "mechanism", "username", "password_env", "password_file", "ca_file",
         "cert_file", "key_file", "roles")
_USER_KEYS = ("username", "password_env", "password_file")


def parse_security(data: object, *, source: str, cluster: str, base: Path | None) -> KafkaSecurity:
    """The ``kafka.security`` section (absent: plain text)."""
    if data is None:
        return KafkaSecurity(cluster=cluster)
    found = _mapping(data, "kafka.security", source, _KEYS)
    protocol = _choice(found.get("protocol", "PLAINTEXT"), PROTOCOLS, "kafka.security.protocol", source)
    mechanism = _choice(found.get("mechanism", "SCRAM-SHA-512"), MECHANISMS,
                        "kafka.security.mechanism", source)
    sasl = protocol.startswith("SASL_")
    files = {key: _path(found.get(key), f"kafka.security.{key}", source, base)
             for key in ("ca_file", "cert_file", "key_file")}
    if files["key_file"] and not files["cert_file"]:
        raise ConfigError(f"{source}: kafka.security.key_file needs cert_file", value="kafka.security.key_file")
    user = {k: found[k] for k in (*_USER_KEYS, "password") if k in found}
    credentials = _credentials(user, "kafka.security", source, base, sasl) if (user or sasl) else None
    roles = _mapping(found.get("roles") or {}, "kafka.security.roles", source, ACL_ROLES)
    by_role = tuple((role, _credentials(_mapping(spec, f"kafka.security.roles.{role}", source, _USER_KEYS),
                                        f"kafka.security.roles.{role}", source, base, sasl))
                    for role, spec in roles.items())
    return KafkaSecurity(protocol=protocol, mechanism=mechanism, credentials=credentials,
                         roles=by_role, cluster=cluster, **files)


def _credentials(spec: Mapping[str, Any], where: str, source: str, base: Path | None,
                 sasl: bool) -> Credentials:
    if "password" in spec:
        raise ConfigError(f"{source}: {where}.password: never write a password in the file; "
                          "use password_env or password_file", value=f"{where}.password")
    username = spec.get("username")
    if not isinstance(username, str) or not username:
        raise ConfigError(f"{source}: {where}.username is needed (a SASL user)", value=f"{where}.username")
    sources = [k for k in ("password_env", "password_file") if spec.get(k) is not None]
    if sasl and len(sources) != 1:
        raise ConfigError(f"{source}: {where}: give exactly one of password_env or password_file "
                          f"for user {username!r}", value=f"{where}.password_env")
    env = spec.get("password_env")
    if env is not None and (not isinstance(env, str) or not env):
        raise ConfigError(f"{source}: {where}.password_env = {env!r}: a variable name", value=env)
    return Credentials(username, env, _path(spec.get("password_file"), f"{where}.password_file",
                                            source, base))


def _mapping(data: object, where: str, source: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {where} must be a mapping, got {data!r}", value=where)
    for key in data:
        if key not in keys and not (key == "password" and "username" in keys):
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(keys)}"
            raise ConfigError(f"{source}: unknown key '{where}.{key}'{hint}", value=f"{where}.{key}")
    return dict(data)


def _choice(value: object, accepted: tuple[str, ...], where: str, source: str) -> str:
    if not isinstance(value, str) or value.upper() not in accepted:
        raise ConfigError(f"{source}: {where} = {value!r}: one of {', '.join(accepted)}", value=value)
    return value.upper()


def _path(value: object, where: str, source: str, base: Path | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {where} = {value!r}: a file path", value=value)
    path = Path(value).expanduser()
    return str((base / path).resolve() if base is not None and not path.is_absolute() else path)
