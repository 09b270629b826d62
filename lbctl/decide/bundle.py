"""``lbctl decide bundle``: where topics land in a namespace's layout (contracts §5, behaviour §1).

Invariants: the layout is ``bundles`` (N, Pulsar's initial layout) or ``boundaries`` (validated:
0 first, 0xffffffff last, strictly increasing), never both; neither means the single full bundle
of a namespace without a stored layout. Topics keep their input order in the output.
"""

from __future__ import annotations

from typing import Any

from balancer.bundles import NamespaceBundles, topic_hash, validate_namespace
from balancer.errors import InvalidInput, MalformedInput
from lbctl.decide.inputs import integer, known_keys


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, ("namespace", "bundles", "boundaries", "topics"), "")
    namespace = document.get("namespace")
    if not isinstance(namespace, str):
        raise MalformedInput(f"namespace: expected tenant/namespace, got {namespace!r}", value=namespace)
    layout = _layout(validate_namespace(namespace), document)
    topics = document.get("topics", [])
    if not isinstance(topics, list):
        raise MalformedInput(f"topics: expected a list of topic names, got {topics!r}", value="topics")
    placed: dict[str, dict[str, Any]] = {}
    for i, topic in enumerate(topics):
        if not isinstance(topic, str):
            raise MalformedInput(f"topics[{i}]: expected a topic name, got {topic!r}", value=topic)
        value = topic_hash(topic)
        placed[topic] = {"hash": value, "bundle": layout.find(value).name}
    return {"topics": placed}


def _layout(namespace: str, document: dict[str, Any]) -> NamespaceBundles:
    count, boundaries = document.get("bundles"), document.get("boundaries")
    if count is not None and boundaries is not None:
        raise MalformedInput("give either bundles (a count) or boundaries, not both", value="bundles")
    if boundaries is not None:
        if not isinstance(boundaries, list):
            raise MalformedInput(f"boundaries: expected a list of integers, got {boundaries!r}",
                                 value="boundaries")
        edges = [integer(b, f"boundaries[{i}]") for i, b in enumerate(boundaries)]
        try:
            return NamespaceBundles.from_boundaries(namespace, edges)
        except InvalidInput as exc:
            raise type(exc)(f"boundaries: {exc.message}", **exc.details) from None
    if count is not None:
        pieces = integer(count, "bundles")
        try:
            return NamespaceBundles.initial(namespace, pieces)
        except InvalidInput as exc:
            raise type(exc)(f"bundles: {exc.message}", **exc.details) from None
    return NamespaceBundles.single(namespace)
