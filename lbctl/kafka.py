"""``lbctl kafka acls``: the Kafka ACLs a deployment needs, one ``kafka-acls`` command per grant.

Reads ``kafka.security`` of the cluster file (``lbctl --cluster FILE kafka acls`` or
``lbctl kafka acls --cluster FILE``): each actor role's user (``roles``; an actor role without
one uses the file's own user), the admin (``roles.admin``, else the file's user) and the auditor
(``roles.auditor``); a file that names no user (an unsecured Kafka, as the shipped
``conf/cluster.yaml``) gets the grants of Kafka's anonymous principal, every role's. Prints;
changes nothing. The model is ``events.log.kafka_acls``.
"""

from __future__ import annotations

import argparse

from balancer.errors import MalformedInput
from events.log.kafka_acls import WRITERS, render
from events.log.kafka_client import KafkaSecurity
from lbctl.settings import deployment_of

ANONYMOUS = "User:ANONYMOUS"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("kafka", help="Kafka of a deployment: the ACLs of its roles")
    verbs = parser.add_subparsers(dest="kafka_verb", metavar="VERB")
    verbs.required = True
    acls = verbs.add_parser("acls", help="print the kafka-acls commands for every role")
    acls.add_argument("--cluster", dest="cluster_conf", metavar="CLUSTER_YAML", default=argparse.SUPPRESS,
                      help="the deployment's cluster.yaml (same as lbctl --cluster)")
    acls.add_argument("--command-config", default="admin.properties",
                      help="the super user's client properties file, as kafka-acls takes it")
    acls.add_argument("--tool", default="kafka-acls.sh", help="the kafka-acls script to name")
    acls.set_defaults(handler=_acls)


def principals(security: KafkaSecurity) -> dict[str, str]:
    """Role -> ``User:name`` as the deployment uses them (see the module docstring)."""
    own = dict(security.roles)
    found = {role: f"User:{creds.username}" for role, creds in own.items()}
    if security.credentials is not None:
        me = f"User:{security.credentials.username}"
        for role in (*WRITERS, "clients", "admin"):
            found.setdefault(role, me)
    return found


def _acls(args: argparse.Namespace) -> int:
    deployment = getattr(args, "cluster_conf", None)
    if deployment is None:
        raise MalformedInput("lbctl kafka acls needs a cluster file: --cluster FILE", value="--cluster")
    found = deployment_of(args)
    assert found is not None
    names = principals(found.kafka.security)
    if not names:  # no SASL user: every client of the deployment is Kafka's anonymous principal
        names = dict.fromkeys((*WRITERS, "clients", "admin", "auditor"), ANONYMOUS)
        print(f"# {deployment} names no Kafka user (kafka.security): every actor connects as "
              f"{ANONYMOUS}, Kafka's principal for an unauthenticated listener. These grants let "
              "the deployment run once an authorizer is on; name a user per role (docs/operations.md"
              "#security) to keep the roles apart.")
    print(render(found.name, found.kafka.bootstrap_servers, names, tool=args.tool,
                 command_config=args.command_config, source=str(deployment)), end="")
    return 0
