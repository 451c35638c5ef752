"""Samples to target against the global batch (hvdbench/results/analyses/convergence.py): McCandlish's
S(B) = S_min (1 + B / B_crit) recovered from points it made, read from mlperf-logging's RCP tables as
the RCP checker averages them (SUITE.md section 6's plain fit reproduced), and every case the data
cannot support said instead of a number."""

import dataclasses

import pytest

from hvdbench.results.analyses import convergence as CV
from hvdbench.results.analyses.ttt import LayoutParts
from hvdbench.results.records.rows import TttGroup


def line(s_min, b_crit, batches):
    return [(b, s_min * (1 + b / b_crit)) for b in batches]


def test_the_fit_recovers_s_min_and_b_crit():
    cb = CV.fit(line(128_000, 78.0, (16, 32, 64, 128)))
    assert cb.status == CV.FIT and cb.s_min == pytest.approx(128_000) and cb.b_crit == pytest.approx(78.0)
    assert cb.r2 == pytest.approx(1.0) and cb.max_rel == pytest.approx(0.0, abs=1e-12)
    assert cb.samples(256) == pytest.approx(128_000 * (1 + 256 / 78))


@pytest.mark.parametrize("benchmark,s_min,b_crit,r2,max_rel", [
    ("llama31_8b", 128.2e3, 78.5, 0.992, 0.042),
    ("gpt_oss_20b", 161.5e3, 73.5, 0.997, 0.013),
    ("flux1", 6.015e6, 2666, 0.996, 0.033),
    ("llama2_70b_lora", 3162, 49.0, 0.976, 0.157),
])
def test_the_rcp_tables_give_suite_md_s_plain_fit(benchmark, s_min, b_crit, r2, max_rel):
    """SUITE.md section 6 fitted the olympic RCP means of training 6.1.0 by plain least squares."""
    used, points, runs = CV.rcp_points(benchmark, "6.1.0")
    assert used == "6.1.0" and runs >= 10 and len(points) >= 3
    cb = CV.fit(points, relative=False)
    assert cb.s_min == pytest.approx(s_min, rel=2e-3) and cb.b_crit == pytest.approx(b_crit, rel=3e-3)
    assert cb.r2 == pytest.approx(r2, abs=1e-3) and cb.max_rel == pytest.approx(max_rel, abs=1e-3)
    relative = CV.fit(points)  # the report's fit: relative residuals
    assert relative.status == CV.FIT and relative.b_crit == pytest.approx(b_crit, rel=0.2)


def test_an_rcp_table_is_read_from_the_ruleset_of_the_logs_or_the_last_before_it():
    assert CV.rcp_points("llama31_8b", "5.1.0")[0] == "5.1.0"
    assert CV.rcp_points("resnet", "4.1.0")[0] == "4.0.0"  # retired after 4.0: the last table before
    assert CV.rcp_points("no_such_benchmark") is None
    # RetinaNet is `retinanet` in published 5.x logs, `ssd` in 4.x and in hvdbench's registry
    assert CV.rcp_for("retinanet", "5.1.0")[:2] == ("retinanet", "5.1.0")
    assert CV.rcp_for("retinanet", "4.1.0")[:2] == ("ssd", "4.1.0")


@pytest.mark.parametrize("points,status,said", [
    ([(256, 4.0), (256, 4.1)], CV.ONE_BATCH, "global batch of 256"),
    ([(16, 170_000), (32, 160_000), (64, 150_000)], CV.UNBOUNDED, "S falls"),
    ([(16, 150_000), (32, 175_000), (64, 150_000), (128, 172_000)], CV.UNBOUNDED, "two standard errors"),
    ([(16, 10.0), (32, 20.0), (64, 60.0)], CV.NOT_LINEAR, "faster than linearly"),
    ([(8, 3216), (16, 4032)], CV.TWO_POINTS, "untested"),
])
def test_what_the_data_cannot_support_is_said(points, status, said):
    cb = CV.fit(points)
    assert cb.status == status and said in cb.note
    if status == CV.UNBOUNDED:  # flat: S = S_min at every batch, B_crit not bounded
        assert cb.b_crit is None and cb.samples(1024) == pytest.approx(sum(s for _, s in points) / len(points))
    if status in (CV.ONE_BATCH, CV.NOT_LINEAR):
        assert not cb.usable and cb.samples(64) is None
    if status == CV.TWO_POINTS:
        assert cb.samples(8) == pytest.approx(3216) and cb.samples(16) == pytest.approx(4032)


def parts(system, model, points, unit="samples"):
    return [LayoutParts(group=TttGroup(system=system, model=model, framework="nemo"), layout=f"{b // 8}x8",
                        nodes=b // 8, gpus_per_node=8, gpus=b,
                        global_batch=b, runs_used=8, unit=unit, trained=s, train_s=1000.0, eval_s=10.0, other_s=0.0,
                        ttt_s=1010.0) for b, s in points]


class Published:
    """A published run's ruleset, as MllogRun carries it."""

    def __init__(self, model, ruleset):
        self.model, self.ruleset = model, ruleset


def test_rows_fit_each_group_and_each_benchmark_s_rcp_table(tmp_path):
    ps = parts("Acme B200", "llama31_8b", line(140_000, 90.0, (16, 32, 64))) + parts(
        "Acme B200", "retinanet", [(256, 4.0)], unit="epochs")
    rows = CV.rows(ps, [Published("llama31_8b", "5.1.0"), Published("retinanet", "5.1.0")])
    by = {(r.model, r.source): r for r in rows}
    runs = by[("llama31_8b", "runs")]
    assert runs.status == CV.FIT and runs.b_crit == pytest.approx(90.0) and runs.batch_sizes == "16 32 64"
    assert by[("retinanet", "runs")].status == CV.ONE_BATCH
    rcp = by[("llama31_8b", "RCP llama31_8b (training 5.1.0)")]
    assert rcp.unit == "samples" and rcp.ruleset == "5.1.0" and rcp.b_crit > 0
    assert by[("retinanet", "RCP retinanet (training 5.1.0)")].unit == "epochs"
    text = CV.markdown(rows)
    assert "critical batch size" in text and "| llama31_8b | Acme B200 | runs |" in text
    written = CV.write(rows, tmp_path)
    assert [p.name for p in written] == ["convergence.csv", "convergence.png"]
    header = (tmp_path / "convergence.csv").read_text().splitlines()[0].split(",")
    assert header == list(CV.ConvergenceRow.columns())


def test_hvdbench_s_own_models_are_fitted_from_the_registry_s_benchmark():
    """A sweep's model is hvdbench's name (resnet50); its RCP table is MLPerf's `resnet`."""
    rows = CV.rows(parts("cpu", "resnet50", line(30.0, 4000.0, (32, 64, 128)), unit="samples"))
    assert [r.source for r in rows] == ["runs", "RCP resnet (training 4.0.0)"]


def test_a_published_benchmark_without_an_rcp_table_is_said(tmp_path):
    # Its RCP row was left out with no word: a reader could not tell "no table" from "not looked at".
    rows = CV.rows(parts("Acme B200", "nosuchbench", line(140_000, 90.0, (16, 32, 64))),
                   [Published("nosuchbench", "5.1.0")])
    none = [r for r in rows if r.source == "RCP: none"]
    assert [(r.model, r.ruleset, r.status, r.note) for r in none] == [
        ("nosuchbench", "5.1.0", "no RCP", "mlperf-logging has no RCP table for 'nosuchbench' in training 5.1.0 "
                                           "or before: nothing to compare its runs with")]
    assert "| nosuchbench | – | RCP: none |" in CV.markdown(rows)
    assert [p.name for p in CV.write(rows, tmp_path)] == ["convergence.csv", "convergence.png"]


def test_runs_of_two_engines_are_told_apart_in_the_table_and_the_figure():
    """A ddp,fsdp time-to-accuracy sweep fits one line per engine: each says its engine ('runs (ddp)'),
    where both read 'runs' / 'runs: cpu' before; a model fitted once keeps plain 'runs'."""
    def engine_parts(engine):
        return [dataclasses.replace(p, group=dataclasses.replace(p.group, engine=engine))
                for p in parts("cpu", "resnet50", line(6000, 64.0, (32, 64, 128)))]

    rows = CV.rows(engine_parts("ddp") + engine_parts("fsdp") + parts("cpu", "bert", line(9000, 90.0, (16, 32))))
    text = CV.markdown(rows)
    assert "| resnet50 | cpu | runs (ddp) |" in text and "| resnet50 | cpu | runs (fsdp) |" in text
    assert "| bert | cpu | runs |" in text
    labels = [t.get_text() for ax in CV.figure(rows).axes for t in ax.get_legend().get_texts()]
    assert "runs (ddp): cpu" in labels and "runs (fsdp): cpu" in labels and "runs: cpu" in labels
