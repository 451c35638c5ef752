"""Hosts and layouts: hostfile parsing (good and bad), --hosts, the Slurm allocation, layout
enumeration and selection."""

from pathlib import Path

import pytest

from hvdbench.errors import ConfigError, TopologyError
from hvdbench.topology import (Host, Layout, default_gpu_counts, format_hostfile, hosts_from_slurm,
                               layouts_for, parse_hostfile, parse_hosts_arg, parse_layout, parse_layouts,
                               scontrol_argv, select_layouts, validate_hostname, write_hostfile)

ROOT = Path(__file__).resolve().parents[2]


def hostfile(tmp_path, text):
    path = tmp_path / "hosts"
    path.write_text(text)
    return path


# --- hostfiles ---------------------------------------------------------------------------------

def test_hostfile_with_comments_blank_lines_and_max_slots(tmp_path):
    path = hostfile(tmp_path, "# cluster\n\nnode1 slots=8\n  node2   slots=4 max_slots=8  # rack B\n"
                              "node-3.example.org slots=2 max-slots=2\n")
    assert parse_hostfile(path) == [Host("node1", 8), Host("node2", 4), Host("node-3.example.org", 2)]


def test_example_hostfiles_parse():
    assert parse_hostfile(ROOT / "hostfiles/localhost") == [Host("localhost", 2)]
    assert parse_hostfile(ROOT / "hostfiles/example-2node") == [Host("node1", 8), Host("node2", 8)]
    assert len(parse_hostfile(ROOT / "hostfiles/example-4node")) == 4
    assert parse_hostfile(ROOT / "hostfiles/example-openmpi")[1] == Host("node2.cluster.local", 4)


@pytest.mark.parametrize("text, line, message", [
    ("node1 slots=8\nnode2\n", 2, "missing slots=N"),
    ("node1 slots=8\nnode2 slots 4\n", 2, "malformed line"),
    ("node1 cores=8\n", 1, "malformed line"),
    ("node1 slots=eight\n", 1, "whole number"),
    ("node1 slots=-1\n", 1, "whole number"),
    ("# a\nnode1 slots=0\n", 2, "zero slots"),
    ("node1 slots=2\n\nnode1 slots=2\n", 3, "duplicate host 'node1'"),
    ("node;rm slots=2\n", 1, "invalid host name"),
    ("-oProxyCommand=x slots=2\n", 1, "invalid host name"),
    ("node1 slots=4 max_slots=2\n", 1, "max_slots=2 is below slots=4"),
])
def test_bad_hostfile_names_file_and_line(tmp_path, text, line, message):
    path = hostfile(tmp_path, text)
    with pytest.raises(TopologyError) as e:
        parse_hostfile(path)
    assert str(e.value).startswith(f"{path}:{line}: ")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_and_empty_hostfile(tmp_path):
    with pytest.raises(TopologyError, match="no such hostfile"):
        parse_hostfile(tmp_path / "nope")
    with pytest.raises(TopologyError, match="no hosts"):
        parse_hostfile(hostfile(tmp_path, "# only a comment\n\n"))


def test_hostfile_round_trip(tmp_path):
    hosts = [Host("a", 2), Host("b.c", 4)]
    assert format_hostfile(hosts) == "a slots=2\nb.c slots=4\n"
    assert parse_hostfile(write_hostfile(tmp_path / "h", hosts)) == hosts


def test_hostname_validation():
    for good in ("localhost", "node01", "gpu-1.rack_a.example.org", "10.0.0.1"):
        assert validate_hostname(good) == good
    for bad in ("", "-x", "a b", "a;b", "a$(id)", "x" * 254, "a..b", "a/b"):
        with pytest.raises(TopologyError):
            validate_hostname(bad)


# --- --hosts -------------------------------------------------------------------------------------

def test_hosts_arg():
    assert parse_hosts_arg("h1:8,h2:4") == [Host("h1", 8), Host("h2", 4)]
    assert parse_hosts_arg("localhost:2") == [Host("localhost", 2)]


@pytest.mark.parametrize("spec, message", [
    ("h1", "malformed entry 'h1'"), (":4", "malformed"), ("h1:0", "zero slots"),
    ("h1:2,h1:2", "duplicate host 'h1'"), ("h 1:2", "invalid host name"), ("h1:x", "whole number"),
])
def test_bad_hosts_arg(spec, message):
    with pytest.raises(TopologyError, match=message):
        parse_hosts_arg(spec)


# --- Slurm ---------------------------------------------------------------------------------------

def test_scontrol_argv():
    assert scontrol_argv("gpu[01-03]") == ["scontrol", "show", "hostnames", "gpu[01-03]"]


def test_hosts_from_slurm_allocation():
    seen = []

    def expand(argv):  # what `scontrol show hostnames gpu[01-02]` prints
        seen.append(argv)
        return "gpu01\ngpu02\n"

    env = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NTASKS_PER_NODE": "4"}
    assert hosts_from_slurm(env, expand=expand) == [Host("gpu01", 4), Host("gpu02", 4)]
    assert seen == [["scontrol", "show", "hostnames", "gpu[01-02]"]]
    assert hosts_from_slurm(env, gpus_per_node=8, expand=expand)[0] == Host("gpu01", 8)
    env = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_GPUS_PER_NODE": "a100:8"}
    assert hosts_from_slurm(env, expand=expand)[1] == Host("gpu02", 8)


def test_slurm_errors():
    with pytest.raises(TopologyError, match="not inside a Slurm allocation"):
        hosts_from_slurm({}, expand=lambda argv: "")
    with pytest.raises(TopologyError, match="--gpus-per-node"):
        hosts_from_slurm({"SLURM_JOB_NODELIST": "n1"}, expand=lambda argv: "n1\n")
    with pytest.raises(TopologyError, match="invalid host name"):
        hosts_from_slurm({"SLURM_JOB_NODELIST": "x", "SLURM_NTASKS_PER_NODE": "1"},
                         expand=lambda argv: "bad host\n")


# --- layouts -------------------------------------------------------------------------------------

def names(layouts):
    return [lay.name for lay in layouts]


def test_layout_properties():
    lay = Layout(2, 4, ("a", "b"))
    assert (lay.name, lay.world_size, lay.scale) == ("2x4", 8, "out")
    assert Layout(1, 8, ("a",)).scale == "up"
    assert lay.host_slots == [Host("a", 4), Host("b", 4)]


def test_a_layout_is_read_written_and_ordered_in_one_place():
    """Layout.parse reads every NxG, str() writes it (the one formatter: runs.csv's layout column and
    the report's), and layouts sort by GPUs, then nodes (scale-up first), as the tables list them."""
    assert Layout.parse(" 02x4 ") == Layout(2, 4) and str(Layout.parse("2x4")) == "2x4" == Layout(2, 4).name
    assert str(Layout(0, 0)) == ""  # a published log that names no layout
    assert f"{Layout(16, 8)}x256x1" == "16x8x256x1"  # an MLPerf config name is written from it too
    with pytest.raises(ConfigError, match=r"--predict '2by2': expected NODESxGPUS"):
        Layout.parse("2by2", "--predict")
    with pytest.raises(ConfigError, match="0 nodes|nodes must be at least 1"):
        Layout.parse("0x8")
    with pytest.raises(ConfigError, match="above the limit of 1,024 per host"):
        Layout.parse("1x2000")
    assert sorted([Layout(4, 1), Layout(1, 4), Layout(2, 1), Layout(1, 2), Layout(1, 1), Layout(2, 2)]) == [
        Layout(1, 1), Layout(1, 2), Layout(2, 1), Layout(1, 4), Layout(2, 2), Layout(4, 1)]
    assert min({Layout(2, 1), Layout(1, 2)}) == Layout(1, 2) and Layout(1, 8) < Layout(2, 8) <= Layout(2, 8)
    assert parse_layouts("1x8, 2x8") == [Layout(1, 8), Layout(2, 8)] and parse_layout("2x4") == (2, 4)


def test_two_hosts_of_four_slots_four_gpus():
    hosts = [Host("a", 4), Host("b", 4)]
    layouts = select_layouts(hosts, gpus=[4])
    assert layouts == [Layout(1, 4, ("a",)), Layout(2, 2, ("a", "b"))]  # never 4x1: only 2 hosts


def test_default_gpu_counts_are_powers_of_two_that_fit():
    assert default_gpu_counts([Host("a", 8), Host("b", 8)]) == [1, 2, 4, 8, 16]
    assert default_gpu_counts([Host("a", 3), Host("b", 3)]) == [1, 2, 4]  # 6 slots; 4 = 2x2
    assert default_gpu_counts([Host("localhost", 2)]) == [1, 2]


def test_all_layouts_of_a_four_node_cluster():
    hosts = [Host(f"n{i}", 8) for i in range(4)]
    assert names(select_layouts(hosts)) == ["1x1", "1x2", "2x1", "1x4", "2x2", "4x1", "1x8", "2x4",
                                            "4x2", "2x8", "4x4", "4x8"]
    assert names(select_layouts(hosts, [8, 16], "packed")) == ["1x8", "2x8"]
    assert names(select_layouts(hosts, [8, 16], "spread")) == ["4x2", "4x4"]


def test_hosts_with_too_few_slots_are_skipped():
    hosts = [Host("small", 2), Host("big1", 4), Host("big2", 4)]
    assert layouts_for(hosts, 4) == [Layout(1, 4, ("big1",)), Layout(2, 2, ("small", "big1"))]
    assert layouts_for(hosts, 8) == [Layout(2, 4, ("big1", "big2"))]


def test_explicit_layouts_keep_order_and_must_fit():
    hosts = [Host("a", 4), Host("b", 4)]
    assert names(select_layouts(hosts, None, "2x2,1x4,1x1")) == ["2x2", "1x4", "1x1"]
    with pytest.raises(TopologyError, match="--layouts 4x1: needs 4 host"):
        select_layouts(hosts, None, "4x1")
    with pytest.raises(TopologyError, match="not NODESxGPUS"):
        select_layouts(hosts, None, "2by2")
    with pytest.raises(TopologyError, match="not in --gpus"):
        select_layouts(hosts, [8], "2x2")


def test_impossible_gpu_count_is_a_clear_error():
    hosts = [Host("a", 4), Host("b", 4)]
    with pytest.raises(TopologyError, match=r"16 GPUs requested but only 8 slots on 2 host\(s\) \(a:4,b:4\)"):
        select_layouts(hosts, [16])
    with pytest.raises(TopologyError, match="no nodes x GPUs layout of 7 GPUs"):
        select_layouts(hosts, [7])  # 7 = 1x7 or 7x1: neither fits
