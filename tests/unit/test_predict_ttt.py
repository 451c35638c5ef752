"""Time to train of layouts not run (hvdbench/results/predict/time_to_train.py): exact on layouts made from the
model it fits (samples from the critical batch size, a GPU's time per sample c + d / per-GPU batch,
evaluation scaling with the ranks), the RCP table's B_crit for published logs, the throughput
predictor's rate for sweeps, and a row that says why where a number would not be honest (model
parallelism changed, too few fitted layouts, samples at an unknown batch). `hvdbench predict --mllog`
on published-format logs writes it to prediction.csv."""

import io
import logging
import math

import pytest
from click.testing import CliRunner
from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger

from hvdbench.cli.predict import predict as predict_cmd
from hvdbench.results import mllog
from hvdbench.results.analyses import convergence as CV
from hvdbench.results.analyses.ttt import LayoutParts
from hvdbench.results.predict import throughput as P
from hvdbench.results.predict import time_to_train as PT
from hvdbench.results.records.schema import PREDICTION_COLUMNS, RunResult

# The truth the layouts are made from.
S_MIN, B_CRIT = 100_000.0, 64.0
C_S, D_S = 0.2, 0.5  # a GPU's seconds per sample: C_S + D_S / per-GPU batch
EVAL_A, OTHER_S = 0.08, 5.0  # evaluation: EVAL_A x samples / GPUs seconds; the rest: 5 s


def truth(nodes, gpus, batch, model="toy"):
    n = nodes * gpus
    trained = S_MIN * (1 + batch / B_CRIT)
    rate = n / (C_S + D_S * n / batch)
    e = EVAL_A * trained / n
    return LayoutParts(group={"system": "Acme B200", "model": model, "flavor": "", "framework": "nemo", "engine": "",
                              "precision": "", "levers": ""}, layout=f"{nodes}x{gpus}", nodes=nodes, gpus_per_node=gpus, gpus=n,
                       global_batch=batch, runs_used=8, unit="samples", trained=trained, train_s=trained / rate,
                       eval_s=e, other_s=OTHER_S, ttt_s=trained / rate + e + OTHER_S)


def by_layout(rows):
    return {r["layout"]: r for r in rows}


def test_layouts_not_fitted_are_predicted_exactly_from_the_model_they_follow():
    parts = [truth(1, 8, 16), truth(2, 8, 64), truth(4, 8, 64), truth(8, 8, 128)]
    tf = PT.fit_group(parts, {"1x8", "2x8"})
    assert tf.rate == pytest.approx((C_S, D_S)) and tf.convergence.status == CV.TWO_POINTS
    assert tf.eval_law == pytest.approx((EVAL_A, 1.0)) and tf.other_law == pytest.approx((OTHER_S, 0.0))
    rows = by_layout(PT.group_rows(tf, [(16, 8)]))
    for layout in ("4x8", "8x8"):
        r = rows[layout]
        assert r["predicted_ttt_min"] == pytest.approx(r["measured_ttt_min"], rel=1e-9)
        assert r["ttt_predicted_vs_measured"] == pytest.approx(1.0) and r["flags"] == ""
        parts_sum = sum(r[k] for k in ("ideal_ttt_min", "convergence_min", "throughput_min", "eval_min", "other_min"))
        assert parts_sum == pytest.approx(r["predicted_ttt_min"], rel=1e-12)
    assert rows["1x8"]["flags"] == "fitted;baseline" and rows["2x8"]["flags"] == "fitted"
    new = rows["16x8"]  # not measured: the largest fitted layout's 4 per GPU, 512
    assert new["global_batch"] == 512 and "2x8's 4 per GPU x 128 GPUs" in new["global_batch_from"]
    assert new["predicted_ttt_min"] == pytest.approx(truth(16, 8, 512).ttt_s / 60)
    assert new["flags"] == "extrapolated" and new["measured_ttt_min"] is None
    assert set(PREDICTION_COLUMNS) >= {"flags", "note", "layout"} and set(new) <= set(PREDICTION_COLUMNS) | set(
        PT.TTT_PREDICTION_COLUMNS)


def test_one_per_gpu_batch_among_the_fitted_layouts_holds_the_per_gpu_rate():
    tf = PT.fit_group([truth(1, 8, 16), truth(2, 8, 32)])
    assert tf.rate == pytest.approx((C_S + D_S / 2, 0.0)) and "per-GPU rate held" in tf.rate_from
    assert PT.predict_layout(tf, 4, 8)["training_rate"] == pytest.approx(32 / (C_S + D_S / 2))


def test_published_logs_take_the_rcp_tables_mean_where_it_covers_the_batch_else_its_line():
    """Samples to target: the RCP table's own mean (scaled to the fitted layouts) at a batch the table
    covers, interpolated between two of its batches; past its largest, the critical-batch line."""
    _, table, _ = CV.rcp_points("llama31_8b", "5.1.0")  # 16, 32, 64, 96, 128
    mean = dict(table)
    rcp = CV.fit(table)
    parts = []
    for nodes, batch in ((1, 16), (2, 32)):
        p = truth(nodes, 8, batch, model="llama31_8b")
        p.train_s *= 1.1 * mean[batch] / p.trained  # the same rate, at 1.1 x the RCP table's samples
        p.trained = 1.1 * mean[batch]
        parts.append(p)
    tf = PT.fit_group(parts, None, "5.1.0", published=True)
    assert tf.s_scale == pytest.approx(1.1) and tf.convergence.b_crit == pytest.approx(rcp.b_crit)
    assert "RCP llama31_8b (training 5.1.0)" in tf.convergence_from
    assert tf.samples_and_source(64) == (pytest.approx(1.1 * mean[64]), "the RCP table's mean (at 64)")
    s80, said = tf.samples_and_source(80)  # halfway in logs from 64 to 96
    assert s80 == pytest.approx(1.1 * mean[64] ** (1 - math.log(80 / 64) / math.log(1.5))
                                * mean[96] ** (math.log(80 / 64) / math.log(1.5)))
    assert said == "the RCP table's mean (between 64 and 96)" and mean[64] < s80 / 1.1 < mean[96]
    assert tf.samples_and_source(256) == (pytest.approx(1.1 * rcp.samples(256)), "the critical-batch line")
    batch, said = PT.choose_batch(tf, 16, 8)  # 2 per GPU x 128 GPUs = 256: above the table's largest
    assert batch == 128 and "capped at the RCP table's largest batch (128)" in said
    row = PT.predict_layout(tf, 8, 8, 256, "published")
    assert "beyond-rcp" in row["flags"] and row["predicted_ttt_min"] is not None
    assert row["samples_from"] == "the critical-batch line"


def test_model_parallelism_that_changed_is_said_not_predicted():
    """University of Florida's Llama 3.1 8B: batch 16 on 8 GPUs and 32 on 16, then 16 on 32 GPUs."""
    parts = [truth(1, 8, 16), truth(2, 8, 32), truth(4, 8, 16)]
    rows = by_layout(PT.group_rows(PT.fit_group(parts, {"1x8", "2x8"}), []))
    r = rows["4x8"]
    assert r["flags"] == "model-parallel" and r["predicted_ttt_min"] is None
    assert r["measured_ttt_min"] == pytest.approx(parts[2].ttt_s / 60)
    assert "at least 2 GPUs on each data-parallel replica" in r["note"] and "model parallelism changed" in r["note"]


def test_too_few_fitted_layouts_are_said():
    tf = PT.fit_group([truth(1, 8, 16), truth(2, 8, 32)], {"1x8"})
    rows = PT.group_rows(tf, [(4, 8)])
    assert all(r["flags"] == "too-few-fitted" and r["predicted_ttt_min"] is None for r in rows)
    assert "the rate model needs two" in rows[0]["note"]
    none = PT.fit_group([truth(1, 8, 16)], {"9x8"})
    assert "names none of this group's" in PT.predict_layout(none, 1, 8)["note"]


def test_one_fitted_batch_and_no_rcp_predicts_that_batch_only():
    tf = PT.fit_group([truth(1, 8, 32), truth(2, 8, 32)])
    assert tf.convergence.status == CV.ONE_BATCH
    same = PT.predict_layout(tf, 4, 8, 32, "published")
    assert same["predicted_trained"] == pytest.approx(truth(1, 8, 32).trained) and same["flags"] == ""
    other = PT.predict_layout(tf, 2, 8, 64, "published")
    assert other["flags"] == "convergence-unknown" and other["predicted_ttt_min"] is None


def throughput_runs():
    """Throughput runs with a step breakdown at 1x1, 1x2, 2x1 (16 per GPU): what predict.fit_group fits."""
    out = []
    for nodes, gpus in ((1, 1), (1, 2), (2, 1)):
        n = nodes * gpus
        work, comm = 0.05, 0.0 if n == 1 else (0.01 if nodes == 1 else 0.03)
        step = work + comm
        r = RunResult(model="resnet50", flavor="debug", framework="torch", mode="throughput", batch_per_gpu=16,
                      global_batch=16 * n, world_size=n, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}",
                      parameters=1_000_000, throughput=16 * n / step, step_time_mean_s=step, data_s=0.1 * work,
                      compute_s=0.8 * work, comm_s=comm, update_s=0.1 * work, other_s=0.0, hosts="a;b",
                      devices="cpu")
        out.append(r)
    return out


def test_a_sweep_s_rate_is_the_throughput_predictor_s_times_its_own_ratio():
    fit = P.fit_group(throughput_runs())
    parts = []
    for nodes, gpus in ((1, 1), (1, 2)):
        p = truth(nodes, gpus, 16 * nodes * gpus, model="resnet50")
        p.group.update(system="cpu", flavor="debug", framework="torch", precision=fit.group["precision"],
                       engine=fit.group.get("engine", ""))
        rate = 0.8 * P.predict(fit, nodes, gpus)["predicted_throughput"]  # real data: 80 % of it
        p.train_s = p.trained / rate
        parts.append(p)
    tf = PT.fit_group(parts, throughput_fits=[fit])
    assert tf.throughput_fit is fit and tf.calibration == pytest.approx(0.8)
    assert "the throughput predictor" in tf.rate_from
    assert tf.training_rate(2, 2, 64) == pytest.approx(0.8 * P.predict(fit, 2, 2)["predicted_throughput"])


# --- hvdbench predict --mllog ------------------------------------------------------------------------

def nemo_log(nodes, batch, blocks, start_s=0.0):
    """A published NeMo-format llama31_8b log (mlperf_logging's own line format): blocks of 12,288
    samples, each 400 s on one node of 8 GPUs (the per-GPU batch times the nodes: the same per-GPU
    rate), an evaluation after each."""
    buf = io.StringIO()
    logger = logging.Logger(f"nemo{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    log = MLLogger(logger=logger)
    t0 = 1_760_000_000_000 + int(1000 * start_s)

    def at(s, key, value=None, kind="event", **meta):
        getattr(log, kind)(key, value, metadata=meta, time_ms=t0 + round(1000 * s))
    for key, value in ((C.SUBMISSION_BENCHMARK, "llama31_8b"), (C.SUBMISSION_ORG, "Acme"),
                       (C.SUBMISSION_PLATFORM, "Acme B200"), (C.SUBMISSION_DIVISION, "closed"),
                       (mllog.NUMBER_OF_NODES, nodes), (mllog.ACCELERATORS_PER_NODE, 8), (C.GLOBAL_BATCH_SIZE, batch)):
        at(-1, key, value)
    block_s = 400.0 / nodes  # 8 GPUs x nodes at the same per-GPU rate
    t = 0.0
    at(t, C.RUN_START, kind="start")
    for i in range(blocks):
        at(t, C.BLOCK_START, kind="start", samples_count=12288)
        t += block_s
        at(t, C.BLOCK_STOP, kind="end", samples_count=12288)
        at(t, C.EVAL_START, kind="start", samples_count=12288 * (i + 1))
        t += 10.0 / nodes
        at(t, C.EVAL_ACCURACY, 3.2 if i == blocks - 1 else 3.9, samples_count=12288 * (i + 1))
        at(t, C.EVAL_STOP, kind="end", samples_count=12288 * (i + 1))
    at(t, C.RUN_STOP, kind="end", samples_count=12288 * blocks, status="success")
    return buf.getvalue()


def test_predict_mllog_writes_time_to_train_predictions(tmp_path):
    root = tmp_path / "training_results_v5.1"
    for nodes, batch, blocks in ((1, 16, 13), (2, 32, 16), (4, 64, 19), (8, 32, 16)):
        folder = root / f"n{nodes}"
        folder.mkdir(parents=True)
        (folder / "result_0.txt").write_text(nemo_log(nodes, batch, blocks))
    out = tmp_path / "out"
    got = CliRunner().invoke(predict_cmd, ["--mllog", str(root), "--fit-on", "1x8,2x8", "--layouts", "4x8,16x8",
                                           "--out", str(out)])
    assert got.exit_code == 0, got.output
    assert "## Predicted time to train" in got.output and (out / "prediction_ttt.png").is_file()
    import csv

    with open(out / "prediction.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == list(PREDICTION_COLUMNS) + [c for c in PT.TTT_PREDICTION_COLUMNS
                                                                if c not in PREDICTION_COLUMNS]
        rows = {r["layout"]: r for r in reader}
    four = rows["4x8"]
    assert four["global_batch_from"] == "published" and four["measured_ttt_min"]
    ratio = float(four["ttt_predicted_vs_measured"])
    assert math.isfinite(ratio) and abs(ratio - 1) < 0.1  # the same per-GPU rate; S from the RCP line
    assert rows["8x8"]["flags"] == "model-parallel" and rows["8x8"]["predicted_ttt_min"] == ""
    assert rows["16x8"]["global_batch"] == "128" and "capped" in rows["16x8"]["global_batch_from"]
    # every number has its interval, printed and written
    assert "80 % interval (min)" in got.output
    for layout in ("4x8", "16x8"):
        r = rows[layout]
        assert float(r["predicted_ttt_low_min"]) < float(r["predicted_ttt_min"]) < float(r["predicted_ttt_high_min"])
        assert float(r["training_rate_low"]) < float(r["training_rate"]) < float(r["training_rate_high"])
        assert r["interval"] == "0.8" and r["samples_from"].startswith("the RCP table's mean")
    assert (float(rows["16x8"]["predicted_ttt_high_min"]) / float(rows["16x8"]["predicted_ttt_low_min"])
            > float(rows["4x8"]["predicted_ttt_high_min"]) / float(rows["4x8"]["predicted_ttt_low_min"]))


def test_predict_without_input_or_fit_is_a_one_line_error(tmp_path):
    got = CliRunner().invoke(predict_cmd, ["--layouts", "2x8"])
    assert got.exit_code != 0 and "give at least one SWEEP_DIR or --mllog DIR" in got.output


def hvdbench_log(epochs: int, epoch_s: float, eval_s: float, dataset: int = 1000) -> str:
    """A time-to-accuracy run's own mllog.txt as hvdbench's worker writes it: the training set's size
    before run_start, an evaluation after every epoch."""
    buf = io.StringIO()
    logger = logging.Logger(f"own{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    log = MLLogger(logger=logger)
    t0 = 1_700_000_000_000

    def at(s, key, value=None, kind="event", **meta):
        getattr(log, kind)(key, value, metadata=meta, time_ms=t0 + round(1000 * s))
    at(-1, C.SUBMISSION_BENCHMARK, "resnet")
    at(-1, C.TRAIN_SAMPLES, dataset)
    at(0, C.RUN_START, kind="start")
    t = 0.0
    for e in range(1, epochs + 1):
        at(t, C.BLOCK_START, kind="start", first_epoch_num=e, epoch_count=1)
        at(t, C.EPOCH_START, kind="start", epoch_num=e)
        t += epoch_s
        at(t, C.EPOCH_STOP, kind="end", epoch_num=e)
        at(t, C.BLOCK_STOP, kind="end", first_epoch_num=e)
        at(t, C.EVAL_START, kind="start", epoch_num=e)
        t += eval_s
        at(t, C.EVAL_STOP, kind="end", epoch_num=e)
        at(t, C.EVAL_ACCURACY, 0.96 if e == epochs else 0.5, epoch_num=e)
    at(t, C.RUN_STOP, kind="end", status="success", epoch_num=epochs)
    return buf.getvalue()


def test_report_predicts_a_sweep_s_time_to_train_from_the_throughput_predictor(tmp_path):
    from hvdbench.cli.report import report
    from hvdbench.results.records.store import append_run

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    tput = throughput_runs()
    fit = P.fit_group(tput)
    for i, r in enumerate(tput):
        r.run_id, r.sweep = f"{r.layout}-t{i}", "s"
        append_run(sweep / "runs.csv", r)
    for nodes, gpus, epochs in ((1, 1, 3), (1, 2, 4), (2, 1, 4)):
        n = nodes * gpus
        rate = 0.8 * P.predict(fit, nodes, gpus)["predicted_throughput"]
        epoch_s, eval_s = 1000 / rate, 2.0 / n
        r = RunResult(model="resnet50", flavor="debug", framework="torch", mode="time_to_accuracy", batch_per_gpu=16,
                      global_batch=16 * n, world_size=n, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}",
                      parameters=1_000_000, devices="cpu", hosts="a;b", run_id=f"{nodes}x{gpus}-a", sweep="s",
                      epochs=epochs, epochs_to_target=epochs, time_to_train_s=epochs * (epoch_s + eval_s),
                      time_per_epoch_s=epoch_s)
        append_run(sweep / "runs.csv", r)
        (sweep / r.run_id).mkdir()
        (sweep / r.run_id / "mllog.txt").write_text(hvdbench_log(epochs, epoch_s, eval_s))
    got = CliRunner().invoke(report, [str(sweep), "--predict", "2x2", "--out", str(tmp_path / "r")])
    assert got.exit_code == 0, got.output
    import csv

    with open(tmp_path / "r" / "prediction.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["mode"] == "time_to_accuracy"]
    new = next(r for r in rows if r["layout"] == "2x2")
    assert new["global_batch"] == "64" and "throughput predictor" in new["rate_from"]
    assert float(new["training_rate"]) == pytest.approx(0.8 * P.predict(fit, 2, 2)["predicted_throughput"], rel=1e-4)
    assert float(new["predicted_trained"]) == pytest.approx(1000 * (3 + (4 - 3) / 16 * (64 - 16)), rel=1e-4)
    for r in rows:  # the fitted layouts come back
        if r["measured_ttt_min"]:
            assert float(r["ttt_predicted_vs_measured"]) == pytest.approx(1.0, rel=1e-4)  # times logged in ms
    assert float(new["predicted_ttt_low_min"]) < float(new["predicted_ttt_min"]) < float(new["predicted_ttt_high_min"])
    assert "80 % interval (min)" in (tmp_path / "r" / "summary.md").read_text()
    assert (tmp_path / "r" / "ttt_waterfall.csv").is_file() and (tmp_path / "r" / "prediction_ttt.png").is_file()


def test_every_time_to_train_has_an_interval_from_residuals_repeats_and_the_distance_past_the_fit():
    from hvdbench.results.predict.fitting import COVERAGE, PER_DOUBLING, Z

    parts = [truth(1, 8, 16), truth(2, 8, 64), truth(4, 8, 64), truth(16, 8, 128)]
    tf = PT.fit_group(parts, {"1x8", "2x8"})
    rows = by_layout(PT.group_rows(tf, []))
    fitted = rows["2x8"]  # the model is exact and no repeats are known: no width
    assert fitted["predicted_ttt_low_min"] == pytest.approx(fitted["predicted_ttt_high_min"])
    far = rows["16x8"]  # past 8-16 GPUs, 2-4 per GPU and 16-64 global: 3 doublings, 1 halving and 1 doubling
    rate_sigma = PER_DOUBLING["gpus"] * 3 + PER_DOUBLING["per_gpu_batch"] * 1
    sigma = rate_sigma + PER_DOUBLING["global_batch"] * 1
    assert far["predicted_ttt_high_min"] / far["predicted_ttt_min"] == pytest.approx(math.exp(Z * sigma))
    assert far["predicted_ttt_low_min"] < far["measured_ttt_min"] < far["predicted_ttt_high_min"]
    assert far["training_rate_high"] / far["training_rate"] == pytest.approx(math.exp(Z * rate_sigma))
    assert far["predicted_throughput_low"] == pytest.approx(far["training_rate_low"]) and far["interval"] == COVERAGE
    # The repeats' spread widens every interval: cv 10 % over 8 runs each side
    for p in parts:
        p.rows = [{"ttt_std_min": 0.1 * p.ttt_s / 60, "ttt_mean_min": p.ttt_s / 60}]
    tf = PT.fit_group(parts, {"1x8", "2x8"})
    fitted = by_layout(PT.group_rows(tf, []))["2x8"]
    assert fitted["predicted_ttt_high_min"] / fitted["predicted_ttt_min"] == pytest.approx(math.exp(Z * 0.1 * 0.5))
    assert "repeats 5.0 %" in fitted["interval_from"]
    text = PT.markdown(PT.group_rows(tf, []), [tf])
    assert "80 % interval (min)" in text
