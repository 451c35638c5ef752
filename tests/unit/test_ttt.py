"""Time to train in parts (hvdbench/results/analyses/ttt.py): what each run trained, how long it trained,
evaluated and did the rest, read from its own MLPerf events in the shapes published logs have them
(NeMo's blocks of samples, ResNet's blocks of epochs around its evaluations, BERT's one block around
the whole run, SSD's steps under train_samples, a throughput only), and each layout's time to train
as a waterfall from the ideal whose parts add up to the measured time exactly."""

import io
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger

from hvdbench.cli.report import report
from hvdbench.results import mllog
from hvdbench.results.analyses import ttt
from hvdbench.results.analyses.waterfall import WaterfallRow
from hvdbench.results.mllog.summary import summarize
from hvdbench.results.records.schema import LoadedRun
from hvdbench.results.report.load import read_run_folder
from hvdbench.results.stats.aggregate import time_to_train_rows

T0 = 1_760_030_931_926  # ms: a published run's run_start


class Log:
    """One run's events in the official line format (mlperf_logging's own MLLogger), at given times."""

    def __init__(self):
        self.buf = io.StringIO()
        logger = logging.Logger(f"ttt{id(self)}")
        logger.addHandler(logging.StreamHandler(self.buf))
        self.log = MLLogger(logger=logger)

    def at(self, seconds: float, key: str, value=None, kind="event", **metadata):
        getattr(self.log, kind)(key, value, metadata=metadata, time_ms=T0 + round(1000 * seconds))
        return self

    def lines(self) -> list[str]:
        return self.buf.getvalue().splitlines()

    def summary(self):
        events = [mllog.parse_line(line, i + 1) for i, line in enumerate(self.lines())]
        return summarize([e for e in events if e is not None])


def nemo_run(blocks=3, block_s=400.0, eval_s=10.0, per_block=12288, batch=16, benchmark="llama31_8b",
             nodes=1, gpus=8, start_s=0.0, org="Acme", platform="Acme B200", division="open") -> Log:
    """A NeMo-style run as University of Florida's llama31_8b logs are: blocks of samples, an
    evaluation after each (outside the block), run_stop with the samples trained."""
    log = Log()
    log.at(-60, C.SUBMISSION_BENCHMARK, benchmark).at(-60, C.SUBMISSION_ORG, org)
    log.at(-60, C.SUBMISSION_PLATFORM, platform).at(-60, C.SUBMISSION_DIVISION, division)
    log.at(-60, mllog.NUMBER_OF_NODES, nodes).at(-60, mllog.ACCELERATORS_PER_NODE, gpus)
    log.at(-60, C.GLOBAL_BATCH_SIZE, batch).at(-60, C.TRAIN_SAMPLES, 1574207408)
    t = start_s
    log.at(t, C.RUN_START, kind="start")
    for i in range(blocks):
        log.at(t, C.BLOCK_START, kind="start", samples_count=per_block, step=i)
        t += block_s
        log.at(t, C.BLOCK_STOP, kind="end", samples_count=per_block, step=i)
        log.at(t, C.EVAL_START, kind="start", samples_count=per_block * (i + 1))
        t += eval_s
        log.at(t, C.EVAL_ACCURACY, 3.2 if i == blocks - 1 else 4.0, samples_count=per_block * (i + 1))
        log.at(t, C.EVAL_STOP, kind="end", samples_count=per_block * (i + 1))
    t += 0.5  # run_stop a moment after the last evaluation: the rest of the run
    log.at(t, C.RUN_STOP, kind="end", samples_count=per_block * blocks, status="success")
    return log


def test_nemo_blocks_give_samples_training_and_evaluation():
    s = nemo_run().summary()
    assert s.trained == 3 * 12288 and s.trained_unit == "samples" and s.trained_from == "run_stop samples_count"
    assert s.train_s == pytest.approx(1200.0) and s.train_from.startswith("block_start/block_stop (3)")
    assert s.eval_s == pytest.approx(30.0) and s.eval_from.startswith("eval_start/eval_stop (3")
    assert s.time_to_train_s - s.train_s - s.eval_s == pytest.approx(0.5)  # the rest


def test_resnet_epochs_inside_blocks_are_the_finer_intervals():
    """ResNet logs a block of 4 epochs around its evaluation and epoch intervals that leave it out:
    the epochs are the training intervals, the evaluation counted once; samples = epochs x the
    training set's size logged before run_start."""
    log = Log().at(-1, C.SUBMISSION_BENCHMARK, "resnet").at(-1, C.TRAIN_SAMPLES, 1281167)
    log.at(0, C.RUN_START, kind="start").at(0, C.BLOCK_START, kind="start", first_epoch_num=1, epoch_count=4)
    for e in range(4):
        log.at(10 * e, C.EPOCH_START, kind="start", epoch_num=e + 1).at(10 * e + 9, C.EPOCH_STOP, kind="end",
                                                                        epoch_num=e + 1)
    log.at(40, C.EVAL_START, kind="start", epoch_num=4).at(44, C.EVAL_ACCURACY, 0.76, epoch_num=4)
    log.at(44, C.EVAL_STOP, kind="end", epoch_num=4).at(45, C.BLOCK_STOP, kind="end", first_epoch_num=1)
    log.at(45, C.RUN_STOP, kind="end", status="success")
    s = log.summary()
    assert s.train_s == pytest.approx(36.0) and s.train_from.startswith("epoch_start/epoch_stop (4)")
    assert s.eval_s == pytest.approx(4.0)
    assert s.trained == 4 * 1281167 and s.trained_from == "epochs at the last evaluation x train_samples"


def test_bert_evaluations_inside_one_block_around_the_run_are_evaluation():
    """BERT logs one block around the whole run and stops training for each evaluation inside it;
    its tracked_stats throughput is not used where the block times the training."""
    log = Log().at(-1, C.SUBMISSION_BENCHMARK, "bert").at(-1, C.GLOBAL_BATCH_SIZE, 768)
    log.at(0, C.RUN_START, kind="start").at(0, C.BLOCK_START, kind="start", first_epoch_num=1, epoch_count=1)
    for i, samples in enumerate((150_000, 300_000)):
        log.at(100 * (i + 1), C.EVAL_START, samples, kind="start", epoch_num=samples)
        log.at(100 * (i + 1) + 2, mllog.TRACKED_STATS, {"throughput": 1500.0}, epoch_num=samples)
        log.at(100 * (i + 1) + 2, C.EVAL_ACCURACY, 0.72, epoch_num=samples)
        log.at(100 * (i + 1) + 2, C.EVAL_STOP, samples, kind="end", epoch_num=samples)
    log.at(202, C.BLOCK_STOP, kind="end", first_epoch_num=1).at(202, C.RUN_STOP, kind="end", status="success")
    s = log.summary()
    assert s.trained == 300_000 and s.trained_from == "the last evaluation's samples_count"
    assert s.eval_s == pytest.approx(4.0) and s.train_s == pytest.approx(198.0)


def test_a_throughput_alone_gives_the_training_time():
    log = Log().at(-1, C.SUBMISSION_BENCHMARK, "llama2_70b_lora").at(0, C.RUN_START, kind="start")
    for rate in (2.0, 4.0):  # equal sample intervals: the harmonic mean, 8/3 samples/s
        log.at(1, mllog.TRACKED_STATS, {"throughput": rate})
    log.at(5, C.EVAL_START, kind="start").at(9, C.EVAL_ACCURACY, 0.92, samples_count=3072)
    log.at(9, C.EVAL_STOP, kind="end").at(1200, C.RUN_STOP, kind="end", samples_count=3072, status="success")
    s = log.summary()
    assert s.train_s == pytest.approx(3072 / (8 / 3)) and "harmonic mean of 2" in s.train_from
    assert s.eval_s == pytest.approx(4.0)


def test_without_intervals_or_throughput_the_run_less_evaluation_is_training():
    log = Log().at(-1, C.SUBMISSION_BENCHMARK, "gpt3").at(0, C.RUN_START, kind="start")
    log.at(100, C.EVAL_ACCURACY, 2.69, epoch_num=1000).at(100, C.RUN_STOP, kind="end", status="success")
    s = log.summary()
    assert s.train_s == pytest.approx(100.0) and s.eval_s == 0.0
    assert s.train_from.startswith("run_start -> run_stop less evaluation")
    assert s.eval_from == "no eval_start/eval_stop: none counted"


def test_ssd_steps_under_train_samples_are_not_a_training_set_size():
    """NVIDIA's SSD/RetinaNet log steps per epoch as train_samples (4572 at a batch of 256): their
    progress is counted in epochs, never 4 x 4572 "samples"."""
    log = Log().at(-1, C.SUBMISSION_BENCHMARK, "retinanet").at(-1, C.TRAIN_SAMPLES, 4572)
    log.at(0, C.RUN_START, kind="start").at(0, C.EPOCH_START, kind="start", epoch_num=0)
    log.at(50, C.EPOCH_STOP, kind="end", epoch_num=0).at(50, C.EVAL_START, kind="start", epoch_num=1)
    log.at(60, C.EVAL_ACCURACY, 0.34, epoch_num=4).at(60, C.EVAL_STOP, kind="end", epoch_num=4)
    log.at(60, C.RUN_STOP, kind="end", status="success")
    s = log.summary()
    assert (s.trained, s.trained_unit) == (4, "epochs") and "no training set size" in s.trained_from


# --- the waterfall ----------------------------------------------------------------------------------

def tta_run(layout, batch, trained, rate, eval_s, other_s, repeat=0, model="resnet50"):
    """A time-to-accuracy run whose parts were read from its log: time to train = S / T + E + O."""
    nodes, gpus = map(int, layout.split("x"))
    train_s = trained / rate
    r = LoadedRun(model=model, flavor="debug", framework="torch", mode="time_to_accuracy", run_id=f"{layout}-r{repeat}",
                  repeat=repeat, batch_per_gpu=batch // (nodes * gpus), global_batch=batch, world_size=nodes * gpus,
                  nodes=nodes, gpus_per_node=gpus, layout=layout, devices="cpu", status="success",
                  time_to_train_s=train_s + eval_s + other_s, epochs=trained / 1000, epochs_to_target=trained / 1000)
    r.trained, r.trained_unit, r.trained_from = trained, "samples", "epochs at the last evaluation x train_samples"
    r.train_s, r.train_from = train_s, "epoch_start/epoch_stop (3), less evaluation"
    r.eval_s, r.eval_from = eval_s, "eval_start/eval_stop (3 evaluations)"
    return r


def three(layout, batch, trained, rate, eval_s, other_s):
    """Three repeats, the fastest and slowest a little off (the olympic mean drops them)."""
    return [tta_run(layout, batch, trained, rate, eval_s, other_s, 0),
            tta_run(layout, batch, trained * 0.9, rate, eval_s, other_s, 1),
            tta_run(layout, batch, trained * 1.1, rate, eval_s, other_s, 2)]


@pytest.fixture
def runs():
    return (three("1x1", 32, 6000.0, 100.0, 6.0, 2.0) + three("1x2", 64, 7000.0, 180.0, 4.0, 1.5)
            + three("2x1", 64, 7000.0, 150.0, 4.0, 1.5))


def test_each_layout_s_parts_are_the_means_over_the_runs_its_score_keeps(runs):
    rows = time_to_train_rows(runs)
    parts, notes = ttt.layout_parts(runs, rows)
    assert notes == [] and [p.layout for p in parts] == ["1x1", "1x2", "2x1"]
    for p, row in zip(parts, rows):
        assert p.runs_used == 1  # the olympic mean of 3: the middle one
        assert p.ttt_s == pytest.approx(60 * row.ttt_min)
        assert p.train_s + p.eval_s + p.other_s == pytest.approx(p.ttt_s)
    assert parts[1].trained == 7000.0 and parts[1].throughput == pytest.approx(180.0)


def test_the_parts_add_up_to_the_measured_time_exactly(runs):
    rows = time_to_train_rows(runs)
    parts, _ = ttt.layout_parts(runs, rows)
    falls = ttt.waterfall_rows(parts, rows)
    assert [f.layout for f in falls] == ["1x2", "2x1"]
    for f in falls:
        total = f.ideal_min + f.convergence_min + f.throughput_min + f.eval_min + f.other_min
        assert total == pytest.approx(f.measured_min, rel=1e-12)
        assert f.unattributed_min == f.throughput_min and f.comm_min is None and f.split_from == ""
    f = falls[0]  # 1x2 against 1x1: k = 2
    base_ttt = 6000 / 100 + 6 + 2
    assert f.ideal_min == pytest.approx(base_ttt / 2 / 60)
    assert f.convergence_min == pytest.approx((7000 - 6000) / 180 / 60)
    assert f.throughput_min == pytest.approx(6000 * (1 / 180 - 1 / (2 * 100)) / 60)
    assert f.eval_min == pytest.approx((4 - 6 / 2) / 60) and f.other_min == pytest.approx((1.5 - 2 / 2) / 60)
    assert f.trained_from == "epochs at the last evaluation x train_samples"
    assert f.train_from == "epoch_start/epoch_stop, less evaluation"  # each run's count dropped


def test_the_throughput_part_is_split_as_the_throughput_waterfall_splits_its_loss(runs):
    rows = time_to_train_rows(runs)
    parts, _ = ttt.layout_parts(runs, rows)
    group = rows[0]  # the throughput waterfall's row of the same group, at the same per-GPU batch
    fall = WaterfallRow(system=group.system, model="resnet50", flavor="debug", framework="torch", engine=group.engine,
                        precision=group.precision, levers=group.levers, mode="throughput", batch_per_gpu=32,
                        accum_steps=1, layout="1x2", nodes=1, gpus_per_node=2, gpus=2, baseline="1x1", ideal=200.0,
                        comm_loss=12.0, imbalance_loss=None, data_loss=3.0, compute_loss=4.0, unattributed=1.0,
                        measured=180.0, data_from="breakdown", base_step_ms=None, step_ms=None, data_ms=None,
                        compute_ms=None, comm_ms=None, update_ms=None, other_ms=None, compute_mfu=None)
    row = next(f for f in ttt.waterfall_rows(parts, rows, [fall]) if f.layout == "1x2")
    assert row.comm_min == pytest.approx(0.6 * row.throughput_min)
    assert row.data_min == pytest.approx(0.15 * row.throughput_min)
    assert row.comm_min + row.data_min + row.compute_min + row.unattributed_min == pytest.approx(
        row.throughput_min)
    assert "throughput waterfall" in row.split_from


def test_a_layout_without_an_event_log_has_no_parts_and_says_why(runs):
    runs[0].trained = runs[0].train_s = None  # the olympic middle run of 1x1 had no mllog.txt
    parts, notes = ttt.layout_parts(runs, time_to_train_rows(runs))
    assert [p.layout for p in parts] == ["1x2", "2x1"]
    assert "resnet50 1x1" in notes[0] and "no event log" in notes[0]
    assert ttt.waterfall_rows(parts, time_to_train_rows(runs)) == []  # no baseline, no waterfall


def test_kept_runs_follow_the_olympic_rule():
    done = [tta_run("1x1", 32, s, 100.0, 1.0, 0.0, i) for i, s in enumerate((100.0, 200.0, 300.0, 400.0))]
    assert [r.trained for r in ttt.kept_runs(done, 0)] == [200.0, 300.0]
    assert [r.trained for r in ttt.kept_runs(done, 1)] == [200.0, 300.0, 400.0]  # the DNF is the slowest
    assert [r.trained for r in ttt.kept_runs(done[:2], 1)] == [200.0]  # 3 runs: the DNF is dropped, and the fastest
    assert ttt.kept_runs(done[:1], 1) == []  # DNF: fewer than 3 runs and one did not converge
    assert ttt.kept_runs(done, 2) == []  # two did not converge


def test_read_parts_reads_each_sweep_run_s_own_log(tmp_path, runs):
    run = runs[0]
    (tmp_path / run.run_id).mkdir()
    (tmp_path / run.run_id / "mllog.txt").write_text("\n".join(nemo_run(blocks=2).lines()) + "\n")
    for name in ("trained", "train_s", "eval_s"):
        setattr(run, name, None)
    for r in runs[:2]:  # the second has no folder: it keeps what it has
        read_run_folder(r, tmp_path / r.run_id, [])
    assert run.trained == 2 * 12288 and run.train_s == pytest.approx(800.0) and run.eval_s == pytest.approx(20.0)
    assert runs[1].trained == 5400.0


def test_the_files_and_the_markdown(runs, tmp_path):
    rows = time_to_train_rows(runs)
    parts, _ = ttt.layout_parts(runs, rows)
    falls = ttt.waterfall_rows(parts, rows)
    written = ttt.write(falls, tmp_path)
    assert [p.name for p in written] == ["ttt_waterfall.csv", "ttt_waterfall.png"]
    lines = (tmp_path / "ttt_waterfall.csv").read_text().splitlines()
    assert lines[0].split(",") == list(ttt.TttWaterfallRow.columns()) and len(lines) == 3
    text = ttt.markdown(falls)
    assert "time-to-train waterfall" in text and "| 1x2 (64) | 1x1 (32) |" in text


def test_report_of_published_logs_writes_the_waterfall_and_the_convergence(tmp_path):
    """`hvdbench report --mllog` on NeMo-style logs at three node counts (global batches 16, 32, 64)."""
    logs = tmp_path / "logs"
    for nodes, batch, blocks in ((1, 16, 13), (2, 32, 16), (4, 64, 18)):
        folder = logs / f"n{nodes}"
        folder.mkdir(parents=True)
        for i in range(3):
            run = nemo_run(blocks=blocks + (i - 1), block_s=400.0 / nodes, eval_s=10.0 / nodes, batch=batch,
                           nodes=nodes, start_s=1000.0 * i)
            (folder / f"result_{i}.txt").write_text("\n".join(run.lines()) + "\n")
    got = CliRunner().invoke(report, ["--mllog", str(logs), "--out", str(tmp_path / "r")])
    assert got.exit_code == 0, got.output
    out = tmp_path / "r"
    assert (out / "ttt_waterfall.csv").is_file() and (out / "ttt_waterfall.png").is_file()
    assert (out / "convergence.csv").is_file() and (out / "convergence.png").is_file()
    text = (out / "summary.md").read_text()
    assert "## Why each layout took the time to train it took" in text
    assert "## Convergence against the global batch" in text and "RCP llama31_8b" in text
    lines = (out / "ttt_waterfall.csv").read_text().splitlines()
    assert len(lines) == 3 and ",2x8," in lines[1] and ",4x8," in lines[2]
    assert Path(out / "convergence.csv").read_text().count("\n") >= 3  # the runs' fit and the RCP's


def test_short_times_to_train_are_in_seconds_in_both_figures_alike():
    """Issue 50: the waterfall of runs under a minute reads in seconds, as time_to_train.png does for
    the same runs (not bars of 0.09 min beside a plot in seconds)."""
    from hvdbench.results.render import plots

    fast = three("1x1", 32, 600.0, 100.0, 0.6, 0.2) + three("1x2", 64, 700.0, 180.0, 0.4, 0.15)
    rows = time_to_train_rows(fast)
    falls = ttt.waterfall_rows(ttt.layout_parts(fast, rows)[0], rows)
    ax = ttt.figure(falls).axes[0]
    assert ax.get_ylabel() == "seconds" and plots.time_to_train_figure(rows).axes[0].get_ylabel().startswith(
        "time to train (s)")
    assert ax.figure.legends[0].get_texts()[0].get_text() == "ideal: the baseline's time / rank ratio"  # CPU ranks
    measured = falls[0].measured_min * 60
    assert [t.get_text() for t in ax.texts][-1] == f"{measured:,.1f}"
    slow = three("1x1", 32, 6000.0, 100.0, 6.0, 2.0) + three("1x2", 64, 7000.0, 180.0, 4.0, 1.5)
    rows = time_to_train_rows(slow)
    falls = ttt.waterfall_rows(ttt.layout_parts(slow, rows)[0], rows)
    assert ttt.figure(falls).axes[0].get_ylabel() == "minutes"
    assert plots.time_to_train_figure(rows).axes[0].get_ylabel().startswith("time to train (min)")


def test_the_waterfall_tells_engines_apart_in_its_panels():
    """A ddp,fsdp time-to-accuracy sweep: each panel names its engine, as its section's heading does
    (two identical 'resnet50 1x2 (batch 64) vs 1x1 (batch 32)' panels before)."""
    import dataclasses

    both = [dataclasses.replace(r, engine=engine, precision="fp32") for engine in ("ddp", "fsdp")
            for r in three("1x1", 32, 6000.0, 100.0, 6.0, 2.0) + three("1x2", 64, 7000.0, 180.0, 4.0, 1.5)]
    rows = time_to_train_rows(both)
    falls = ttt.waterfall_rows(ttt.layout_parts(both, rows)[0], rows)
    headings = [line for line in ttt.markdown(falls).splitlines() if line.startswith("### ")]
    titles = [ax.get_title().replace("\n", " ") for ax in ttt.figure(falls).axes if ax.get_title()]
    assert len(headings) == len(titles) == 2
    for heading, title, engine in zip(headings, titles, ("ddp", "fsdp")):
        assert f" · {engine} · fp32" in heading and f" · {engine} · fp32" in title


def test_two_systems_files_of_one_system_are_told_apart_in_the_waterfall():
    """A -POWER submission repeating its system's runs (Dell's v4.1 LoRA 8x8): two rows of one group and
    layout, each panel and table line naming its systems file (two identical panels before)."""
    import dataclasses

    both = [dataclasses.replace(r, result=result) for result in ("XE9680_n8", "XE9680_n8-POWER")
            for r in three("1x1", 32, 6000.0, 100.0, 6.0, 2.0) + three("1x2", 64, 7000.0, 180.0, 4.0, 1.5)]
    rows = time_to_train_rows(both)
    falls = ttt.waterfall_rows(ttt.layout_parts(both, rows)[0], rows)
    titles = sorted(ax.get_title().split(" (batch")[0] for ax in ttt.figure(falls).axes if ax.get_title())
    assert titles == ["1x1 [XE9680_n8-POWER]", "1x2 [XE9680_n8-POWER]", "1x2 [XE9680_n8]"]  # vs the first's 1x1
    table = ttt.markdown(falls)
    assert "| 1x2 [XE9680_n8] (64) |" in table and "| 1x2 [XE9680_n8-POWER] (64) |" in table
    one = ttt.waterfall_rows(ttt.layout_parts(both[:6], rows)[0], rows)
    assert [ax.get_title().split(" (batch")[0] for ax in ttt.figure(one).axes if ax.get_title()] == ["1x2"]
