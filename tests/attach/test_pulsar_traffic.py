"""The traffic plan of `lbctl pulsar traffic`: Zipf shares and the one-line refusals of bad values.

No Pulsar here: what runs against a real cluster is in tests/pulsar/test_cluster.py.
"""

from __future__ import annotations

import pytest

from balancer.errors import MalformedInput
from bench.pulsar_traffic import TrafficPlan, zipf_rates
from lbctl.main import main
from tests.pulsar_server import free_ports


def test_zipf_rates_add_up_to_the_total_hottest_first() -> None:
    rates = zipf_rates(16, 400.0, 1.1)
    assert sum(rates) == pytest.approx(400.0)
    assert rates == sorted(rates, reverse=True)
    assert rates[0] / rates[1] == pytest.approx(2 ** 1.1)


def test_a_zipf_exponent_of_zero_is_uniform() -> None:
    assert zipf_rates(4, 100.0, 0.0) == pytest.approx([25.0] * 4)


def test_a_plan_names_its_topics_in_its_namespace() -> None:
    plan = TrafficPlan(service_url="pulsar://127.0.0.1:6650", namespace="t/ns", topics=3)
    assert plan.topic_names() == [f"persistent://t/ns/traffic-00{i}" for i in range(3)]


@pytest.mark.parametrize(("field", "value"), [
    ("service_url", "http://127.0.0.1:8080"), ("namespace", "no-slash"), ("topics", 0),
    ("rate", 0.0), ("seconds", -1.0), ("messages", 0), ("zipf", -0.5), ("size", 0)])
def test_a_bad_value_is_refused_naming_it(field: str, value: object) -> None:
    args: dict[str, object] = {"service_url": "pulsar://127.0.0.1:6650", field: value}
    with pytest.raises(MalformedInput, match=repr(value).replace("(", r"\(")):
        TrafficPlan(**args)  # type: ignore[arg-type]


def test_no_limit_at_all_is_refused() -> None:
    with pytest.raises(MalformedInput, match="time limit or a message count"):
        TrafficPlan(service_url="pulsar://127.0.0.1:6650", seconds=None, messages=None)


def test_lbctl_pulsar_traffic_exits_2_with_one_line_on_a_bad_rate(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:  # refused while the arguments are parsed
        main(["pulsar", "traffic", "--service-url", "pulsar://127.0.0.1:6650", "--rate", "0"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.strip().splitlines() == [
        "lbctl: error: argument --rate: '0' must be > 0 (see lbctl pulsar traffic --help)"]


def test_lbctl_pulsar_traffic_exits_2_with_one_line_when_no_broker_answers(
        capsys: pytest.CaptureFixture[str]) -> None:
    [port] = free_ports(1)  # nothing listens there
    code = main(["pulsar", "traffic", "--service-url", f"pulsar://127.0.0.1:{port}", "--seconds", "5"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"lbctl: unavailable: Pulsar at pulsar://127.0.0.1:{port}: no broker accepts a connection "
        f"(127.0.0.1:{port})"]


def test_a_service_url_with_several_brokers_names_each() -> None:
    plan = TrafficPlan(service_url="pulsar://127.0.0.1:6650,127.0.0.1:6651/")
    assert plan.hosts() == [("127.0.0.1", 6650), ("127.0.0.1", 6651)]
