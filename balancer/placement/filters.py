"""Broker filters of both load managers (behaviour §5.1 steps 4 and 7, §5.2).

Invariants:
- every filter takes candidates in ascending id order and returns a subset in the same order;
- modular topic cap: drop brokers whose reported topics plus preallocated topics exceed
  ``loadBalancerBrokerMaxTopics``, and undo if that drops every broker; extensible topic cap:
  drop brokers whose reported topics reach it, no undo;
- version filter (only with ``preferLaterVersions``): keep the brokers on the highest semantic
  version (build metadata ignored); a broker without a valid version string is a
  ``BrokerFilterError``, as is an empty set under the modular manager;
- load-manager class filter: keep the brokers whose report names the configured load manager
  (Pulsar's BrokerLoadManagerClassFilter); a report without a class (this project's own brokers)
  counts as running the configured one;
- extensible pipeline: LoadManagerClass -> MaxTopicCount -> Version -> AntiAffinity -> Isolation
  over every available broker; ``extensible_candidates`` raises on a filter error (TransferShedder
  treats that as "not transferable"), the placement path logs it in the step trail and carries on
  with the set as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from balancer.bundles import namespace_of
from balancer.errors import BrokerFilterError, LoadBalancerError
from balancer.placement.anti_affinity import extensible_counts, filter_by_counts
from balancer.placement.base import Step
from balancer.placement.isolation import isolation_candidates

if TYPE_CHECKING:
    from balancer.shedding.base import ClusterView


_IDENT = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)

VersionKey = tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]


def version_key(text: str) -> VersionKey:
    """Semantic-version precedence as a sortable key; raises ``ValueError`` when invalid."""
    found = _SEMVER.match(text.strip())
    if found is None:
        raise ValueError(text)
    major, minor, patch, pre = found.groups()
    if pre is None:
        # A release outranks every pre-release of the same version.
        return (int(major), int(minor), int(patch), 1, ())
    # Numeric identifiers compare as numbers and rank below alphanumeric ones.
    ids: tuple[tuple[int, int | str], ...] = tuple(
        (0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")
    )
    return (int(major), int(minor), int(patch), 0, ids)


def _broker_version(view: ClusterView, broker: str) -> VersionKey:
    data = view.brokers.get(broker)
    if data is None:
        raise BrokerFilterError(f"no broker data for broker {broker!r}", broker=broker)
    text = data.report.version
    if not text:
        raise BrokerFilterError(f"no version string in the report of broker {broker!r}")
    try:
        return version_key(text)
    except ValueError:
        raise BrokerFilterError(
            f"invalid version string {text!r} in the report of broker {broker!r}; "
            "expected MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]"
        ) from None


def filter_versions(view: ClusterView, candidates: Sequence[str]) -> list[str]:
    """Keep the brokers on the latest version (``preferLaterVersions``; off: keep all)."""
    if not view.config.prefer_later_versions:
        return list(candidates)
    if not candidates:
        raise BrokerFilterError("cannot determine the latest broker version of an empty set")
    versions = {b: _broker_version(view, b) for b in candidates}
    latest = max(versions.values())
    return [b for b in candidates if versions[b] == latest]


def filter_load_manager_class(view: ClusterView, candidates: Sequence[str]) -> list[str]:
    """Brokers whose report names the configured load manager (no class reported: kept)."""
    wanted = view.config.load_manager_class_name
    kept = []
    for broker in candidates:
        data = view.brokers.get(broker)
        reported = None if data is None else data.report.load_manager_class
        if reported is None or reported == wanted:
            kept.append(broker)
    return kept


def reported_topics(view: ClusterView, broker: str) -> int:
    data = view.brokers.get(broker)
    return 0 if data is None else data.report.topics


def filter_topic_cap_modular(
    view: ClusterView, candidates: Sequence[str], preallocated_topics: Mapping[str, int]
) -> list[str]:
    """Drop brokers above the topic cap (reported + preallocated); undo if none remain."""
    cap, brokers = view.config.load_balancer_broker_max_topics, view.brokers
    kept = [
        b
        for b in candidates
        if (data := brokers.get(b)) is None or data.report.topics + preallocated_topics.get(b, 0) <= cap
    ]
    return kept or list(candidates)


def filter_topic_cap_extensible(view: ClusterView, candidates: Sequence[str]) -> list[str]:
    cap = view.config.load_balancer_broker_max_topics
    return [b for b in candidates if reported_topics(view, b) < cap]


ExtensibleFilter = Callable[["ClusterView", str, Sequence[str]], list[str]]


def _versions_extensible(view: ClusterView, bundle: str, brokers: Sequence[str]) -> list[str]:
    # The extensible filter passes an empty set through instead of failing.
    return filter_versions(view, brokers) if brokers else []


def _anti_affinity(view: ClusterView, bundle: str, brokers: Sequence[str]) -> list[str]:
    return filter_by_counts(view, brokers, extensible_counts(view, namespace_of(bundle)))


def _isolation(view: ClusterView, bundle: str, brokers: Sequence[str]) -> list[str]:
    allowed = set(isolation_candidates(view, namespace_of(bundle)))
    return [b for b in brokers if b in allowed]


EXTENSIBLE_PIPELINE: tuple[tuple[str, ExtensibleFilter], ...] = (
    ("LoadManagerClass", lambda view, _bundle, brokers: filter_load_manager_class(view, brokers)),
    ("MaxTopicCount", lambda view, _bundle, brokers: filter_topic_cap_extensible(view, brokers)),
    ("Version", _versions_extensible),
    ("AntiAffinity", _anti_affinity),
    ("Isolation", _isolation),
)


def extensible_filter(
    view: ClusterView, bundle: str, *, strict: bool
) -> tuple[list[str], tuple[Step, ...]]:
    """Run the §5.2 pipeline over every available broker; the survivors and the trail.

    ``strict``: a failing filter raises ``BrokerFilterError``; otherwise the failure is noted in
    the trail and the set stays as it was before that filter.
    """
    brokers = sorted(view.available)
    steps = [Step("available", tuple(brokers))]
    for name, apply in EXTENSIBLE_PIPELINE:
        try:
            brokers = apply(view, bundle, brokers)
        except LoadBalancerError as exc:
            if strict:
                raise BrokerFilterError(
                    f"{name} filter failed for {bundle}: {exc.message}", bundle=bundle
                ) from exc
            steps.append(Step(name, tuple(brokers), f"error ignored: {exc.message}"))
            continue
        steps.append(Step(name, tuple(brokers)))
    return brokers, tuple(steps)


def extensible_candidates(view: ClusterView, bundle: str) -> list[str]:
    """§5.2 filters (LoadManagerClass -> MaxTopicCount -> Version -> AntiAffinity -> Isolation)
    over every available broker; ascending ids. Raises ``BrokerFilterError`` on a filter error."""
    brokers, _ = extensible_filter(view, bundle, strict=True)
    return brokers
