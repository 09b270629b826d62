"""broker.conf keys, defaults and validation errors a Pulsar operator would hit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancer.config import (
    KEYS,
    LoadBalancerConfig,
    broker_conf_pairs,
    render_broker_conf,
    snake_case,
)
from balancer.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_every_key_is_an_attribute_with_the_same_default() -> None:
    defaults = LoadBalancerConfig()
    fields = {f.name for f in dataclasses.fields(LoadBalancerConfig)}
    for key in KEYS:
        assert key.attr in fields, key.name
        assert getattr(defaults, key.attr) == key.default, key.name
    # One declaration: every setting attribute is a key (the rest is what was read around them).
    assert fields - {key.attr for key in KEYS} == {"extra", "ignored", "deprecated"}


def test_shipped_broker_conf_lists_every_key_with_its_default() -> None:
    shipped = (ROOT / "conf" / "broker.conf").read_text()
    # The load balancer's keys first; the actors' timers follow (tests/actors/test_conf.py).
    assert shipped.startswith(render_broker_conf())
    assert LoadBalancerConfig.from_broker_conf(shipped) == LoadBalancerConfig()
    assert LoadBalancerConfig.from_broker_conf(shipped).notice() is None  # nothing ignored


def test_pulsar_class_names_are_accepted_for_strategies() -> None:
    config = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.OverloadShedder",
            "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
        }
    )
    assert config.load_balancer_load_shedding_strategy == "OverloadShedder"
    assert config.extensible


def test_transfer_shedder_by_its_pulsar_class_name() -> None:
    config = LoadBalancerConfig.from_broker_conf(
        "loadBalancerLoadSheddingStrategy="
        "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder\n"
    )
    assert config.load_balancer_load_shedding_strategy == "TransferShedder"


def test_unknown_key_names_it_and_the_closest_valid_one() -> None:
    with pytest.raises(ConfigError) as raised:
        LoadBalancerConfig.from_mapping({"loadBalancerBrokerOverloadThresholdPercentage": 80})
    message = str(raised.value)
    assert "loadBalancerBrokerOverloadThresholdPercentage" in message
    assert "loadBalancerBrokerOverloadedThresholdPercentage" in message


def test_bad_value_names_key_value_and_range() -> None:
    with pytest.raises(ConfigError) as raised:
        LoadBalancerConfig.from_mapping({"loadBalancerBrokerOverloadedThresholdPercentage": -5})
    message = str(raised.value)
    assert "loadBalancerBrokerOverloadedThresholdPercentage" in message
    assert "-5" in message and "[0, inf]" in message


def test_percentages_are_not_capped_at_100() -> None:
    # Pulsar caps none of them; its own tests set 400.
    config = LoadBalancerConfig.from_mapping({"loadBalancerBrokerOverloadedThresholdPercentage": 400,
                                              "loadBalancerBrokerThresholdShedderPercentage": 250})
    assert config.overload_threshold == 4.0


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999"])
def test_non_finite_numbers_are_named(raw: str) -> None:
    with pytest.raises(ConfigError, match=rf"loadBalancerHistoryResourcePercentage: '{raw}' is not a number"):
        LoadBalancerConfig.from_broker_conf(f"loadBalancerHistoryResourcePercentage={raw}")


REAL_BROKER_CONF = """
# a few lines of Pulsar 4.0's own conf/broker.conf
metadataStoreUrl=zk:localhost:2181
clusterName=standalone
brokerServicePort=6650
webServicePort=8080
managedLedgerDefaultEnsembleSize=2
loadBalancerEnabled=true
loadBalancerBrokerOverloadedThresholdPercentage=85
loadBalancerBrokerComfortLoadLevelPercentage=65
loadBalancerPlacementStrategy=weightedRandomSelection
loadManagerClassName=org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl
"""


def test_a_real_pulsar_broker_conf_loads() -> None:
    config = LoadBalancerConfig.from_broker_conf(REAL_BROKER_CONF)
    assert config.load_balancer_broker_overloaded_threshold_percentage == 85
    assert sorted(config.ignored) == ["brokerServicePort", "clusterName", "managedLedgerDefaultEnsembleSize",
                                      "metadataStoreUrl", "webServicePort"]
    assert config.notice() == ("5 keys outside load balancing ignored; deprecated: "
                               "loadBalancerBrokerComfortLoadLevelPercentage, loadBalancerPlacementStrategy")
    # A running web service applies its own keys (webServicePort, clusterName): not "ignored".
    applied = config.notice(applied={"webServicePort", "clusterName", "brokerServicePort", "metadataStoreUrl"})
    assert applied == ("1 key outside load balancing ignored; deprecated: "
                       "loadBalancerBrokerComfortLoadLevelPercentage, loadBalancerPlacementStrategy")


def test_a_misspelled_key_is_still_refused_with_the_closest_one() -> None:
    with pytest.raises(ConfigError, match=r"'clusterNme'.*'clusterName'"):
        LoadBalancerConfig.from_broker_conf("clusterNme=standalone")


def test_not_a_number_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"loadBalancerSheddingIntervalMinutes.*'soon'"):
        LoadBalancerConfig.from_broker_conf("loadBalancerSheddingIntervalMinutes=soon")


def test_unknown_strategy_lists_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match=r"FancyShedder.*ThresholdShedder"):
        LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": "FancyShedder"})


def test_misspelled_pulsar_aliases_are_accepted() -> None:
    config = LoadBalancerConfig.from_mapping({"loadBalancerBandwithInResourceWeight": 0.5})
    assert config.load_balancer_bandwidth_in_resource_weight == 0.5


def test_tombstone_delay_shorter_than_in_flight_wait_is_invalid() -> None:
    with pytest.raises(ConfigError, match="TombstoneDelay"):
        LoadBalancerConfig.from_mapping(
            {
                "loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds": 30,
                "loadBalancerInFlightServiceUnitStateWaitingTimeInMillis": 60000,
            }
        )


def test_comments_and_blank_lines_are_ignored_and_bad_lines_named() -> None:
    assert LoadBalancerConfig.from_broker_conf("# hi\n\n  lowerBoundarySheddingEnabled = true \n").lower_boundary_shedding_enabled
    with pytest.raises(ConfigError, match="line 2"):
        LoadBalancerConfig.from_broker_conf("# ok\nthis is not a setting\n")


def test_snake_case_of_acronyms() -> None:
    assert snake_case("loadBalancerCPUResourceWeight") == "load_balancer_cpu_resource_weight"
    assert snake_case("loadBalancerBrokerLoadDataTTLInSeconds") == "load_balancer_broker_load_data_ttl_in_seconds"


@given(st.floats(min_value=0, max_value=100, allow_nan=False))
def test_any_percentage_in_range_round_trips(value: float) -> None:
    config = LoadBalancerConfig.from_mapping({"loadBalancerBrokerThresholdShedderPercentage": value})
    again = LoadBalancerConfig.from_mapping(config.to_mapping())
    assert again == config


def test_avg_shedder_placement_needs_avg_shedder_shedding() -> None:
    with pytest.raises(ConfigError, match="AvgShedder placement"):
        LoadBalancerConfig.from_mapping({"loadBalancerLoadPlacementStrategy": "AvgShedder"})
    paired = LoadBalancerConfig.from_mapping({"loadBalancerLoadPlacementStrategy": "AvgShedder",
                                              "loadBalancerLoadSheddingStrategy": "AvgShedder"})
    assert paired.load_balancer_load_placement_strategy == "AvgShedder"


# -- broker.conf as java.util.Properties reads it ----------------------------------------------------


def test_every_line_form_of_java_properties_is_read() -> None:
    text = "\n".join([
        "# a comment",
        "! another comment",
        "loadBalancerBrokerThresholdShedderPercentage:15",  # key:value
        "loadBalancerSheddingIntervalMinutes 2",  # key value
        "loadBalancerBrokerOverloadedThresholdPercentage = 90 \\",  # continued on the next line
        "   ",
        "loadBalancerLoadSheddingStrategy=\\",
        "    org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        "loadBalancerHistoryResourcePercentage\\u003d0.5",  # an escaped '=' would be in the key: this one is
        "  loadBalancerCPUResourceWeight\t=\t1.5  ",
    ])
    pairs = broker_conf_pairs(text.replace("\\u003d", "="))
    assert pairs["loadBalancerBrokerThresholdShedderPercentage"] == "15"
    assert pairs["loadBalancerSheddingIntervalMinutes"] == "2"
    assert pairs["loadBalancerBrokerOverloadedThresholdPercentage"] == "90"
    assert pairs["loadBalancerLoadSheddingStrategy"] == "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
    assert pairs["loadBalancerCPUResourceWeight"] == "1.5"
    config = LoadBalancerConfig.from_broker_conf(text.replace("\\u003d", "="))
    assert config.load_balancer_broker_threshold_shedder_percentage == 15
    assert config.load_balancer_load_shedding_strategy == "ThresholdShedder"


def test_escapes_and_the_last_of_a_repeated_key() -> None:
    pairs = broker_conf_pairs("a\\:b\\ c=1\nname=caf\\u00e9\\tbar\nx=1\nx=2\n")
    assert pairs == {"a:b c": "1", "name": "café\tbar", "x": "2"}


@pytest.mark.parametrize(("text", "named"), [
    ("loadBalancerSheddingIntervalMinutes=1\nx=\\u12g4\n", r"line 2: '\\\\u12g4' is not a \\uXXXX escape"),
    ("\n\n=5\n", "line 3: '=5' has no key"),
    ("\nno such key here\n", "line 2: unknown configuration key 'no'"),
    ("loadBalancerSheddingIntervalMinutes:nan\n", "line 1: loadBalancerSheddingIntervalMinutes: 'nan' is not an integer"),
])
def test_an_unreadable_line_is_one_error_naming_it(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        LoadBalancerConfig.from_broker_conf(text)
