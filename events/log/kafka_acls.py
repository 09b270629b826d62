"""The Kafka ACLs of a deployment: what each role's principal may do, as ``kafka-acls`` commands.

What the project does on Kafka today (and so what the ACLs allow, nothing more):
- one topic, ``{name}-events``: the leader, the namespace shards and the brokers append to it
  (Write) and fold it (Read); everyone else only reads it;
- the same writers keep their heads checkpoints in ``{name}-writer-heads`` (compacted; the first
  writer creates it: ``events.log.kafka_heads``); no one else touches it;
- commands are Ray calls, not Kafka records: an admin client (``lbctl`` verbs, ``Cluster.connect``)
  sends them to the actors over Ray and follows the events topic; so on Kafka it reads only, and
  may create the events topic (``lbctl run`` creates it when it is missing);
- the leader writes through the transactional id ``{name}-leader``; the namespace shards and
  brokers get the prefixes ``{name}-ns-`` and ``{name}-broker-`` (transactional ids per role);
- readers use no consumer group (they assign partitions), so no group ACL is needed;
- auditors (Spark's Kafka source, ``lbctl log``, ``lbctl explain``, ``lbctl replay``) read the
  events topic, nothing else.
Anything not granted is refused by Kafka's authorizer (``allow.everyone.if.no.acl.found=false``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from events.log.kafka_topics import HEADS_STREAM, topic_name

WRITERS = ("leader", "namespace", "broker")
READERS = ("clients", "admin", "auditor")
ROLE_ORDER = (*WRITERS, *READERS)
_TRANSACTIONAL = {"leader": ("{name}-leader", False), "namespace": ("{name}-ns-", True),
                  "broker": ("{name}-broker-", True)}
_WHY = {
    "leader": "appends the cluster's and brokers' events, through its transactional id",
    "namespace": "namespace shards: append their namespaces' events",
    "broker": "brokers: append their registrations and load reports",
    "clients": "the workload actor: follows the events, sends lookups over Ray",
    "admin": "lbctl verbs and Cluster.connect: follow the events, send commands over Ray; "
             "create the events topic (lbctl run)",
    "auditor": "Spark replays, lbctl log/explain: read the events only",
}


@dataclass(frozen=True, slots=True)
class Grant:
    """One ``kafka-acls --add``: a principal, operations, and one resource."""

    role: str
    principal: str
    operations: tuple[str, ...]
    resource: str
    """``topic`` or ``transactional-id``."""
    name: str
    prefixed: bool = False

    def arguments(self) -> list[str]:
        out = ["--add", "--allow-principal", self.principal]
        for operation in self.operations:
            out += ["--operation", operation]
        out += [f"--{self.resource}", self.name]
        return out + (["--resource-pattern-type", "prefixed"] if self.prefixed else [])


def grants(cluster: str, principals: Mapping[str, str]) -> list[Grant]:
    """Every ACL of ``cluster`` for the roles in ``principals`` (role -> ``User:name``)."""
    topic = f"{cluster}-events"
    out: list[Grant] = []
    for role in ROLE_ORDER:
        principal = principals.get(role)
        if principal is None:
            continue
        if role in WRITERS:
            out.append(Grant(role, principal, ("Read", "Write", "Describe"), "topic", topic))
            pattern, prefixed = _TRANSACTIONAL[role]
            out.append(Grant(role, principal, ("Write", "Describe"), "transactional-id",
                             pattern.format(name=cluster), prefixed))
            out.append(Grant(role, principal, ("Read", "Write", "Describe", "Create"), "topic",
                             topic_name(cluster, HEADS_STREAM)))
        elif role == "admin":
            out.append(Grant(role, principal, ("Read", "Describe", "Create"), "topic", topic))
        else:
            out.append(Grant(role, principal, ("Read", "Describe"), "topic", topic))
    return out


def render(cluster: str, bootstrap: str, principals: Mapping[str, str], *,
           tool: str = "kafka-acls.sh", command_config: str = "admin.properties",
           source: str = "cluster.yaml") -> str:
    """The commands, one per grant, each under a comment naming its role and why."""
    lines = [f"# Kafka ACLs of cluster {cluster!r} ({source}); run as a Kafka super user.",
             "# Everything not granted here is refused (allow.everyone.if.no.acl.found=false)."]
    missing = [role for role in ROLE_ORDER if role not in principals]
    if missing:
        lines.append(f"# no principal for {', '.join(missing)} (kafka.security.roles): left out")
    seen: set[str] = set()
    for grant in grants(cluster, principals):
        if grant.role not in seen:
            seen.add(grant.role)
            lines.append(f"# {grant.role} ({grant.principal}): {_WHY[grant.role]}")
        command = [tool, "--bootstrap-server", bootstrap, "--command-config", command_config,
                   *grant.arguments()]
        lines.append(shlex.join(command))
    return "\n".join(lines) + "\n"
