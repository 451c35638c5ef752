"""The verdict (issue 55): each check pass / warn / fail / not measured against the criteria, a slow node
and a slow link named, a check without data never "pass", the criteria file's errors one line naming the
file, key and line; and cost.csv's GPU-hours and money.

    .venv/bin/python -m pytest tests/unit/test_verdict.py
"""

import pytest
from click.testing import CliRunner
from test_links import captured
from test_stragglers import run as ranked_run
from test_stragglers import slow_node3_cluster

from hvdbench.cli.main import cli
from hvdbench.errors import ConfigError
from hvdbench.results.analyses import cost, verdict
from hvdbench.results.records.schema import LoadedRun
from hvdbench.results.report.build import Options, build
from hvdbench.results.report.load import Loaded


def states(report):
    return {r.check: r for r in report.sections["verdict"].rows}


def test_a_slow_node_and_its_links_fail_naming_it_and_what_was_not_measured_says_why():
    report = build(Loaded(runs=slow_node3_cluster(), links=captured("3x1-node3-shaped")))
    checks = states(report)
    assert checks["stragglers"].state == "fail" and checks["stragglers"].subject == "node3"
    assert "node3's ranks compute" in checks["stragglers"].detail
    assert checks["link_pairs"].state == "fail" and checks["link_pairs"].figure == pytest.approx(0.1, abs=0.05)
    assert "every slow pair holds hl-node3" in checks["link_pairs"].detail
    assert checks["failed_runs"].state == "pass" and checks["failed_runs"].figure == 0
    for name in ("published_share", "allreduce_busbw", "harness_vs_bare", "time_to_train_rcp"):
        assert checks[name].state == "not measured" and checks[name].figure is None and checks[name].detail
    assert [r.check for r in report.sections["verdict"].rows] == list(verdict.default_criteria())
    assert report.text.index("## Verdict") < report.text.index("## Scaling")  # summary.md opens with it


def test_an_even_cluster_passes_and_a_criteria_file_moves_a_threshold(tmp_path):
    even = [ranked_run(layout, hosts, [0.05] * len(hosts), k) for k in range(3)
            for layout, hosts in (("1x1", ["n1"]), ("2x1", ["n1", "n2"]))]
    checks = states(build(Loaded(runs=even)))
    assert checks["stragglers"].state == "pass" and checks["stragglers"].figure == 0
    assert checks["scaling_efficiency"].state == "pass"
    mine = tmp_path / "mine.yaml"
    mine.write_text("checks:\n  scaling_efficiency:\n    at_least: 1.5\n    severity: fail\n")
    checks = states(build(Loaded(runs=even), Options(criteria=verdict.load_criteria(mine))))
    assert checks["scaling_efficiency"].state == "fail" and checks["scaling_efficiency"].threshold == 1.5
    assert "64-H100" in checks["scaling_efficiency"].source  # the source stays the default's where not given
    assert len(checks) == len(verdict.default_criteria())
    mine.write_text("replace: true\nchecks:\n  failed_runs:\n    at_most: 1\n    severity: warn\n"
                    "    source: our own rule\n")
    checks = states(build(Loaded(runs=even), Options(criteria=verdict.load_criteria(mine))))
    assert list(checks) == ["failed_runs"] and checks["failed_runs"].source == "our own rule"


@pytest.mark.parametrize("text, said", [
    ("checks:\n  scaling_efficiency:\n    at_leest: 0.5\n", "line 3: checks.scaling_efficiency.at_leest: unknown key"),
    ("checks:\n  nope:\n    at_least: 0.5\n", "line 2: checks.nope: unknown check"),
    ("checks:\n  run_spread:\n    at_most: lots\n", "line 3: checks.run_spread.at_most: a number, not 'lots'"),
    ("checks:\n  run_spread:\n    severity: bad\n", "line 3: checks.run_spread.severity: one of fail, warn"),
    ("checks:\n  run_spread:\n    at_most: 1\n    at_least: 0\n", "line 2: checks.run_spread: at_least or at_most"),
    ("checks: [\n", "line 2: not YAML"),
    ("thresholds:\n  x: 1\n", "line 1: unknown key 'thresholds'"),
    ("replace: maybe\nchecks: {}\n", "line 1: replace: true or false"),
])
def test_a_bad_criteria_file_is_one_line_naming_the_file_key_and_line(tmp_path, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        verdict.load_criteria(path)
    assert str(e.value).startswith(f"{path}: ") and said in str(e.value) and "\n" not in str(e.value)


def test_report_refuses_a_bad_criteria_file_before_writing_anything(tmp_path):
    sweep = tmp_path / "s"
    sweep.mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text("checks:\n  run_spread:\n    at_most: x\n")
    result = CliRunner().invoke(cli, ["report", str(sweep), "--criteria", str(bad)])
    assert result.exit_code == 1 and result.output.startswith(f"Error: {bad}: line 3: ")
    assert result.output.count("\n") == 1 and not (sweep / "report").exists()


def test_cost_counts_gpu_hours_of_the_runs_and_of_a_time_to_train_and_prices_them():
    def tta(layout, minutes, wall_s, energy_j=None):
        nodes, per = map(int, layout.split("x"))
        return LoadedRun(run_id=f"{layout}-{minutes}", model="resnet50", flavor="debug", framework="torch",
                         mode="time_to_accuracy", devices="NVIDIA H100 80GB HBM3", world_size=nodes * per, nodes=nodes,
                         gpus_per_node=per, layout=layout, batch_per_gpu=32, global_batch=32 * nodes * per,
                         status="success", time_to_train_s=60 * minutes, epochs_to_target=5, wall_s=wall_s,
                         energy_j=energy_j, metric_name="top1", target=0.75, final_metric=0.76)
    runs = [tta("1x1", 60, 3700, 3.6e6), tta("1x1", 60, 3700, 3.6e6), tta("1x2", 30, 1900)]
    rows = build(Loaded(runs=runs), Options(gpu_hour_price=2.0)).sections["cost"].rows
    one, two = (next(r for r in rows if r.layout == layout) for layout in ("1x1", "1x2"))
    assert (one.source, one.ttt_min, one.gpu_hours_to_train, one.cost_to_train) == ("measured", 60, 1.0, 2.0)
    assert one.run_gpu_hours == pytest.approx(2 * 3700 / 3600) and one.run_cost == pytest.approx(2 * 2 * 3700 / 3600)
    assert one.energy_kwh_to_train == pytest.approx(1.0) and two.energy_kwh_to_train is None
    assert (two.gpus, two.gpu_hours_to_train, two.cost_to_train) == (2, 1.0, 2.0)
    unpriced = cost.cost_rows(runs, [], build(Loaded(runs=runs)).sections["tables"].rows.time_to_train, [])
    assert all(r.cost_to_train is None and r.gpu_hour_price is None for r in unpriced)
