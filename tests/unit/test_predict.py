"""The layout predictor (hvdbench/results/predict.py) recovers the parameters its inputs were
generated with, and predicts layouts it was not fitted on from them."""

import dataclasses
import math

import pytest

from hvdbench.errors import ConfigError
from hvdbench.results import predict as P
from hvdbench.results.schema import PREDICTION_COLUMNS, AllreduceRow, RunResult

# The "true" machine the synthetic runs come from.
T1 = 0.050  # s of work per step, one rank alone
LIMIT = 1.5  # ranks a machine holds before each slows
PARAMS = 2_000_000  # 8 MB of fp32 gradients
LINKS = {"intra": P.Link("intra", 20e-6, 2.0e9, "truth"), "inter": P.Link("inter", 150e-6, 12.5e6, "truth")}
EXPOSURE = {"intra": 2.0, "inter": 0.7}  # loopback allreduces slowed by compute; 30 % of inter hidden
BATCH = 16


def true_step(nodes, gpus, shared=True):
    r = nodes * gpus if shared else gpus
    work = T1 * max(1.0, r / LIMIT)
    n = nodes * gpus
    link = LINKS["inter" if nodes > 1 else "intra"]
    return work, EXPOSURE[link.kind] * link.allreduce_s(PARAMS * 4, n)


def run(nodes, gpus, repeat=1, shared=True):
    work, comm = true_step(nodes, gpus, shared)
    n = nodes * gpus
    step = work + comm
    r = RunResult(model="resnet50", flavor="debug", framework="torch", mode="throughput", batch_per_gpu=BATCH,
                  global_batch=BATCH * n, world_size=n, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}",
                  parameters=PARAMS, throughput=n * BATCH / step, step_time_mean_s=step, repeat=repeat,
                  data_s=0.1 * work, compute_s=0.7 * work, comm_s=comm, update_s=0.15 * work, other_s=0.05 * work,
                  hosts="localhost")
    r.link = "emulated veth bridge, 100mbit" if shared else ""
    return r


def bench_rows(nodes, gpus):
    link = LINKS["inter" if nodes > 1 else "intra"]
    n = nodes * gpus
    rows = []
    for size in (1 << 16, 1 << 20, PARAMS * 4, 1 << 24):  # the gradients' size among them
        t = link.allreduce_s(size, n)
        rows.append(AllreduceRow(run_id=f"b{nodes}{gpus}", impl="horovod", dtype="fp32", bytes=size, time_mean_s=t,
                                 world_size=n, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}"))
        # MPI's rows and fp16 rows are not the Horovod fp32 curve: they must not move the fit.
        rows.append(AllreduceRow(run_id=f"b{nodes}{gpus}", impl="mpi", dtype="fp32", bytes=size, time_mean_s=t / 9,
                                 world_size=n, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}"))
    return rows


FIT_LAYOUTS = [(1, 1), (1, 2), (2, 1)]


@pytest.fixture
def fit():
    runs = [run(n, g, k) for n, g in FIT_LAYOUTS for k in (1, 2)]
    return P.fit_group(runs, bench_rows(1, 2) + bench_rows(2, 1))


def test_the_fit_recovers_every_parameter_it_was_generated_with(fit):
    assert fit.t1 == pytest.approx(T1)
    assert fit.ranks_per_machine_limit == pytest.approx(LIMIT)
    assert fit.shared_machine is True  # the emulated link says so
    assert fit.gradient_bytes == PARAMS * 4
    for kind, truth in LINKS.items():
        assert fit.links[kind].busbw_b_s == pytest.approx(truth.busbw_b_s, rel=1e-6)
        assert fit.links[kind].latency_s == pytest.approx(truth.latency_s, rel=1e-6)
        assert fit.links[kind].source.startswith("bench allreduce")
    assert fit.exposure == pytest.approx(EXPOSURE)
    assert fit.calibration == pytest.approx(1.0)
    assert fit.baseline == "1x1" and fit.fitted_on == ("1x1", "1x2", "2x1")


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (4, 1), (8, 8), (16, 8)])
def test_layouts_not_run_are_predicted_from_the_fitted_parameters(fit, nodes, gpus):
    row = P.predict(fit, nodes, gpus)
    work, comm = true_step(nodes, gpus)
    assert row["step_ms"] == pytest.approx(1e3 * (work + comm))
    assert row["predicted_throughput"] == pytest.approx(nodes * gpus * BATCH / (work + comm))
    base = BATCH / T1
    assert row["speedup"] == pytest.approx(row["predicted_throughput"] / base)
    assert row["efficiency"] == pytest.approx(row["speedup"] / (nodes * gpus))
    assert row["measured_throughput"] is None and row["fitted"] is False
    assert row["link_kind"] == ("inter" if nodes > 1 else "intra")


def test_a_measured_layout_is_compared_with_its_prediction(fit):
    rows = P.prediction_rows([fit], [(2, 2)])
    assert [r["layout"] for r in rows] == ["1x1", "1x2", "2x1", "2x2"]
    for r in rows[:3]:
        assert r["fitted"] and r["predicted_vs_measured"] == pytest.approx(1.0)
    assert set(rows[0]) == set(PREDICTION_COLUMNS)


def test_separate_machines_do_not_slow_each_other():
    """On a real cluster (no emulated link) ranks per machine are the GPUs of one node: 8 nodes of
    one GPU each work as fast as one rank alone."""
    runs = [run(n, g, shared=False) for n, g in FIT_LAYOUTS]
    fit = P.fit_group(runs, bench_rows(1, 2) + bench_rows(2, 1))
    assert fit.shared_machine is False
    assert fit.ranks_per_machine_limit == pytest.approx(LIMIT)
    assert P.predict(fit, 8, 1)["work_ms"] == pytest.approx(1e3 * T1)
    assert P.predict(fit, 1, 8)["work_ms"] == pytest.approx(1e3 * T1 * 8 / LIMIT)


def test_without_a_bench_the_links_come_from_the_runs_exposed_communication():
    runs = [run(n, g) for n, g in FIT_LAYOUTS]
    fit = P.fit_group(runs)
    assert fit.exposure == pytest.approx({"intra": 1.0, "inter": 1.0})
    assert "exposed communication" in fit.links["inter"].source
    # The exposed time of 2x1 is reproduced exactly; it stands for latency + bandwidth together.
    assert P.predict(fit, 2, 1)["exposed_comm_ms"] == pytest.approx(1e3 * true_step(2, 1)[1])


def test_a_machine_that_did_not_slow_has_no_limit():
    global LIMIT
    saved, LIMIT = LIMIT, math.inf
    try:
        fit = P.fit_group([run(n, g) for n, g in FIT_LAYOUTS], bench_rows(1, 2) + bench_rows(2, 1))
    finally:
        LIMIT = saved
    assert math.isinf(fit.ranks_per_machine_limit)
    assert P.predict(fit, 4, 8)["work_ms"] == pytest.approx(1e3 * T1)


def test_fit_layouts_limit_what_is_fitted_and_the_rest_is_compared():
    runs = [run(n, g) for n, g in [*FIT_LAYOUTS, (2, 2)]]
    # A 2x2 bench row that disagrees with the truth: left out of the fit with the 2x2 runs.
    slow = [dataclasses.replace(r, time_mean_s=r.time_mean_s * 5) for r in bench_rows(2, 2)]
    benches = bench_rows(1, 2) + bench_rows(2, 1) + slow
    fit = P.fit_group(runs, benches, fit_layouts={"1x1", "1x2", "2x1"}, layout_benches=False)
    row = P.predict(fit, 2, 2)
    assert row["fitted"] is False and row["predicted_vs_measured"] == pytest.approx(1.0)
    assert row["allreduce_from"] == "link model"
    # With its own bench, a layout's allreduce is what that bench measured (here 5x the model's).
    fit = P.fit_group(runs, benches, fit_layouts={"1x1", "1x2", "2x1"})
    row = P.predict(fit, 2, 2)
    assert row["allreduce_from"] == "bench of this layout"
    assert row["allreduce_ms"] == pytest.approx(5e3 * LINKS["inter"].allreduce_s(PARAMS * 4, 4))
    assert P.predict(fit, 4, 1)["allreduce_from"] == "link model"


def test_runs_without_a_breakdown_give_no_fit_and_a_missing_link_is_a_clear_error():
    bare = run(1, 1)
    bare.comm_s = None
    assert P.fit_group([bare]) is None
    fit = P.fit_group([run(1, 1)])
    with pytest.raises(ConfigError, match="no inter-node link was measured.*2x1"):
        P.predict(fit, 2, 4)
    assert P.predict(fit, 1, 1)["predicted_throughput"] == pytest.approx(BATCH / T1)
    # Asked for in a table, the layout is left out with the reason, and the others still come.
    rows = P.prediction_rows([fit], [(2, 4), (1, 1)])
    assert [r["layout"] for r in rows] == ["1x1"] and "2x4" in fit.notes[0]
    assert "Not predicted" in P.markdown(rows, [fit])


def test_layouts_parse_and_bad_ones_are_named():
    assert P.parse_layouts("2x2, 8x8") == [(2, 2), (8, 8)]
    with pytest.raises(ConfigError, match="8by8"):
        P.parse_layouts("2x2,8by8")
    with pytest.raises(ConfigError):
        P.parse_layouts(" , ")


def test_markdown_and_figure_name_every_layout(fit, tmp_path):
    rows = P.prediction_rows([fit], [(8, 8)])
    text = P.markdown(rows, [fit])
    assert "8x8" in text and "1x2 (fit)" in text and "exposed / allreduce: inter 0.70, intra 2.00" in text
    written = P.write(rows, [fit], tmp_path)
    assert [p.name for p in written] == ["prediction.csv", "prediction.png"]
    header = (tmp_path / "prediction.csv").read_text().splitlines()[0].split(",")
    assert header == list(PREDICTION_COLUMNS)


def test_the_predict_and_report_commands_write_the_prediction(tmp_path):
    from click.testing import CliRunner

    from hvdbench.cli.predict import predict
    from hvdbench.cli.report import report
    from hvdbench.results.store import append_run

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for n, g in FIT_LAYOUTS:
        r = run(n, g)
        r.run_id, r.sweep, r.hosts = f"{n}x{g}-r1", "s", "hvd-node1"
        append_run(sweep / "runs.csv", r)
    got = CliRunner().invoke(predict, [str(sweep), "--layouts", "4x1", "--machines", "shared",
                                       "--out", str(tmp_path / "p")])
    assert got.exit_code == 0, got.output
    assert "| 4x1 | 4 |" in got.output and (tmp_path / "p" / "prediction.png").is_file()
    rows = (tmp_path / "p" / "prediction.csv").read_text().splitlines()
    assert [line.split(",")[8] for line in rows[1:]] == ["1x1", "1x2", "2x1", "4x1"]
    got = CliRunner().invoke(report, [str(sweep), "--predict", "4x1", "--out", str(tmp_path / "r")])
    assert got.exit_code == 0, got.output
    assert "## Predicted layouts" in (tmp_path / "r" / "summary.md").read_text()
    bad = CliRunner().invoke(predict, [str(sweep), "--layouts", "4by1"])
    assert bad.exit_code == 2 and "4by1" in bad.output
