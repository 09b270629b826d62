"""The one namespace rule: a topic's namespace and a bundle id's namespace, from every form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancer.bundles import BundleId, HashRange, namespace_of
from balancer.errors import InvalidBundle, InvalidInput, MalformedInput
from balancer.topics import TopicName, namespace_of_topic
from lbctl.admin_names import topic_name

names = st.from_regex(r"[-=:.\w]{1,6}", fullmatch=True).filter(lambda s: "/" not in s)
locals_ = st.from_regex(r"[-.\w]{1,8}", fullmatch=True)
domains = st.sampled_from(("persistent", "non-persistent"))
namespaces = st.one_of(st.tuples(names, names).map("/".join),
                       st.tuples(names, names, names).map("/".join))


@given(domains, namespaces, locals_, st.none() | st.integers(0, 99))
def test_every_form_of_a_topic_names_the_same_namespace(domain, namespace, local, partition):
    if partition is not None:
        local = f"{local}-partition-{partition}"  # a partition lives in its topic's namespace
    full = f"{domain}://{namespace}/{local}"
    topic = TopicName.parse(full)
    assert (str(topic), topic.namespace, topic.local) == (full, namespace, local)
    assert namespace_of_topic(full) == namespace
    assert namespace_of_topic(f"{namespace}/{local}") == namespace  # without the domain
    assert topic_name(full) == full
    if namespace.count("/") == 1:  # the short form is persistent and v2 only, as in Pulsar
        assert str(TopicName.parse(f"{namespace}/{local}")) == f"persistent://{full.partition('://')[2]}"


@given(namespaces, st.integers(0, 0xFFFFFFFE), st.integers(1, 0xFFFFFFFF))
def test_a_bundle_ids_namespace_is_the_same_from_the_value_type_and_the_text(namespace, low, span):
    hash_range = HashRange(low, min(low + span, 0xFFFFFFFF))
    bundle = f"{namespace}/{hash_range.name}"
    assert namespace_of(bundle) == BundleId.parse(bundle).namespace == namespace
    assert namespace_of(namespace) == namespace  # a namespace passes unchanged


def test_a_malformed_bundle_id_is_its_own_namespace_never_a_neighbours():
    assert namespace_of("public/default/junk") == "public/default/junk"
    assert namespace_of("public/default") == "public/default"
    assert namespace_of("acme/us-west/orders/0x00000000_0xffffffff") == "acme/us-west/orders"


def test_a_bare_name_lives_in_public_default():
    topic = TopicName.parse("orders")
    assert (str(topic), topic.tenant, topic.cluster) == ("persistent://public/default/orders", "public", None)
    v1 = TopicName.parse("persistent://acme/us-west/orders/t")
    assert (v1.namespace, v1.tenant, v1.cluster, v1.local) == ("acme/us-west/orders", "acme", "us-west", "t")


@pytest.mark.parametrize("raw", ["queue://a/b/c", "persistent://a/b", "persistent://a/b/c/d/e",
                                 "a/b", "a/b/c/d", "persistent://a//c", "persistent://a/b/"])
def test_what_is_not_a_topic_name_is_refused_naming_itself(raw):
    with pytest.raises(InvalidInput) as refused:
        TopicName.parse(raw)
    assert repr(raw) in str(refused.value)


def test_a_name_with_too_few_segments_has_no_namespace():
    for raw in ("persistent://a/b", "a", "persistent://x"):
        with pytest.raises(InvalidBundle):
            namespace_of_topic(raw)
    with pytest.raises(MalformedInput):
        TopicName("persistent", "a/b", "c/d")
