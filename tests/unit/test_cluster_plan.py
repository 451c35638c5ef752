"""hvdbench cluster: names, addresses and option validation (pure: nothing is created)."""

from pathlib import Path

import pytest

from hvdbench.cluster.blueprint import (MAX_NODES, ClusterError, UpOptions, format_rate, make_plan, parse_delay,
                                   parse_rate, state_dir_for)


def test_plan_derives_every_name_and_address(tmp_path):
    plan = make_plan(UpOptions("lab", nodes=3, slots=2, subnet="10.50.0.0/24"), state_root=tmp_path)
    assert [n.name for n in plan.nodes] == ["lab-node1", "lab-node2", "lab-node3"]
    assert [n.address for n in plan.nodes] == ["10.50.0.2", "10.50.0.3", "10.50.0.4"]
    assert [n.host_veth for n in plan.nodes] == ["lab-v1", "lab-v2", "lab-v3"]
    assert (plan.gateway, plan.bridge, plan.prefixlen) == ("10.50.0.1", "lab-br", 24)
    assert plan.state_dir == tmp_path / "lab"
    assert plan.hostfile == tmp_path / "lab" / "hostfile"
    assert not plan.shaping.active and plan.shaping.describe() == "unshaped"


def test_interface_names_fit_linux_limit_at_the_extremes(tmp_path):
    plan = make_plan(UpOptions("abcdefgh", nodes=MAX_NODES, subnet="10.50.0.0/24"), state_root=tmp_path)
    names = [plan.bridge] + [n.host_veth for n in plan.nodes]
    assert max(len(n) for n in names) <= 15
    assert len(set(names)) == len(names)


def test_hostfile_option_and_shaping(tmp_path):
    plan = make_plan(UpOptions("hvd", bandwidth="100mbit", latency="1.5ms", hostfile=tmp_path / "hf"),
                     state_root=tmp_path)
    assert plan.hostfile == tmp_path / "hf"
    assert (plan.shaping.rate_bit, plan.shaping.delay_us) == (100_000_000, 1500)
    assert plan.shaping.describe() == "100mbit, 1500us one-way"


@pytest.mark.parametrize("text,bits", [("10gbit", 10**10), ("100mbit", 10**8), ("1.5gbit", 15 * 10**8),
                                       ("500KBIT", 5 * 10**5), ("64000bit", 64000)])
def test_parse_rate(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["10", "fast", "10gb", "-1mbit", "1bit", ""])
def test_bad_rate_is_one_clear_error(text):
    with pytest.raises(ClusterError, match="--bandwidth"):
        parse_rate(text)


@pytest.mark.parametrize("text,us", [("100us", 100), ("2ms", 2000), ("0.25ms", 250), ("1s", 10**6)])
def test_parse_delay(text, us):
    assert parse_delay(text) == us


@pytest.mark.parametrize("text", ["100", "0us", "1h", "20s", "abc"])
def test_bad_delay_is_one_clear_error(text):
    with pytest.raises(ClusterError, match="--latency"):
        parse_delay(text)


def test_format_rate_round_trips():
    for text in ("8kbit", "100mbit", "10gbit", "1tbit", "1500kbit", "12345bit"):
        assert format_rate(parse_rate(text)) == text


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="Hvd"), "cluster name 'Hvd' is invalid"),
    (dict(name="toolongname"), "is invalid"),
    (dict(name="a/b"), "is invalid"),
    (dict(name="../x"), "is invalid"),
    (dict(nodes=0), "--nodes 0"),
    (dict(nodes=MAX_NODES + 1), "--nodes"),
    (dict(slots=0), "--slots 0"),
    (dict(subnet="10.0.0.1/24"), "--subnet '10.0.0.1/24' is invalid"),
    (dict(subnet="not-a-net"), "--subnet"),
    (dict(subnet="fd00::/64"), "not IPv4"),
    (dict(subnet="10.0.0.0/30", nodes=2), "must be"),
    (dict(subnet="10.0.0.0/8"), "must be"),
])
def test_bad_options_are_refused_before_anything_exists(tmp_path, kwargs, match):
    with pytest.raises(ClusterError, match=match):
        make_plan(UpOptions(**kwargs), state_root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_state_dir_is_named_after_a_validated_name():
    assert state_dir_for("hvd") == Path("/run/hvdbench-cluster/hvd")
    with pytest.raises(ClusterError):
        state_dir_for("..")
