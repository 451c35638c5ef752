"""The :::MLLOG parser on logs written in the official line format (by mlperf_logging's own
MLLogger), with the launcher prefixes of srun -l, Open MPI and horovodrun, junk lines and every
rank logging: events counted once, runs scored as MLPerf scores them."""

import io
import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger

from hvdbench.cli.main import cli
from hvdbench.results import mllog
from hvdbench.results.aggregate import build_tables
from hvdbench.results.schema import SchemaError

T0 = 1_700_000_000_000  # ms


def mlperf_lines(minutes=30.0, status=C.SUCCESS, evals=((1, 0.50), (2, 0.70), (3, 0.759)),
                 platform="DGXA100", batch=3264, shift_ms=0, layout=None, epoch_s=None):
    """One run's events, written by mlperf_logging itself (exact official format)."""
    buf = io.StringIO()
    logger = logging.Logger(f"fixture{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    log = MLLogger(logger=logger)
    t = T0 + shift_ms
    log.event(C.SUBMISSION_BENCHMARK, "resnet", time_ms=t)
    log.event(C.SUBMISSION_PLATFORM, platform, time_ms=t)
    log.event(C.GLOBAL_BATCH_SIZE, batch, time_ms=t)
    if layout:
        log.event(mllog.NUMBER_OF_NODES, layout[0], time_ms=t)
        log.event(mllog.ACCELERATORS_PER_NODE, layout[1], time_ms=t)
    log.start(C.RUN_START, time_ms=t + 1000)
    for i, (epoch, acc) in enumerate(evals):
        if epoch_s:
            log.start(C.EPOCH_START, metadata={C.EPOCH_NUM: epoch}, time_ms=t + 1000 + i * epoch_s * 1000)
            log.end(C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch}, time_ms=t + 1000 + (i + 1) * epoch_s * 1000)
        log.event(C.EVAL_ACCURACY, acc, metadata={C.EPOCH_NUM: epoch}, time_ms=t + 2000 + i)
    log.end(C.RUN_STOP, metadata={C.STATUS: status}, time_ms=t + 1000 + int(minutes * 60_000))
    return buf.getvalue().splitlines()


def test_official_line_format_parses():
    line = (':::MLLOG {"namespace": "", "time_ms": 1234, "event_type": "POINT_IN_TIME", "key": '
            '"eval_accuracy", "value": 0.75, "metadata": {"file": "x.py", "lineno": 1, "epoch_num": 3}}')
    e = mllog.parse_line(line)
    assert (e.time_ms, e.key, e.value, e.metadata["epoch_num"], e.rank) == (1234, "eval_accuracy", 0.75, 3, None)
    assert mllog.parse_line(mlperf_lines()[0]).key == C.SUBMISSION_BENCHMARK


@pytest.mark.parametrize("prefix, rank", [
    (" 3: ", 3), ("12: ", 12),  # srun -l
    ("[1,3]<stdout>:", 3), ("[7,0]<stderr>: ", 0),  # Open MPI --tag-output
    ("[3]<stdout>:", 3), ("Tue Jan 1 00:00:00 2024[5]<stdout>:", 5),  # horovodrun (with timestamps)
    ("", None), ("INFO some launcher text ", None),
])
def test_rank_prefixes(prefix, rank):
    e = mllog.parse_line(prefix + mlperf_lines()[0])
    assert e.key == C.SUBMISSION_BENCHMARK and e.rank == rank


def test_junk_and_broken_lines():
    assert mllog.parse_line("Epoch 3: loss 0.1") is None
    assert mllog.parse_line("") is None
    with pytest.raises(ValueError):  # two ranks' output interleaved mid-record
        mllog.parse_line(' 1: :::MLLOG {"namespace": "", "time_ms": 12 2: :::MLLOG {"x"')
    # trailing output after the JSON (no newline between ranks) still parses
    assert mllog.parse_line(mlperf_lines()[0] + "[1,2]<stdout>:junk").key == C.SUBMISSION_BENCHMARK


def raw_job_log(path, prefix, ranks=4, **kw):
    """Every rank logs every event, a few ms apart, behind its launcher prefix, with noise."""
    lines = ["Starting job 1234 on node001", "NCCL INFO Bootstrap : Using ib0"]
    per_rank = [mlperf_lines(shift_ms=rank * 7, **kw) for rank in range(ranks)]
    for i in range(len(per_rank[0])):
        for rank in reversed(range(ranks)):  # rank 0 is not first in the file
            lines.append(prefix.format(rank=rank) + per_rank[rank][i])
            lines.append(prefix.format(rank=rank) + f"step {i} loss 2.{rank}")
    lines.append(' 1: :::MLLOG {"namespace": "", "time_ms": broken')
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("prefix", ["{rank:>2}: ", "[1,{rank}]<stdout>:", "[{rank}]<stdout>:"])
def test_events_from_several_ranks_are_counted_once(tmp_path, prefix):
    path = raw_job_log(tmp_path / "result_0.txt", prefix, ranks=4, minutes=30.0)
    events, dropped, bad = mllog.read_events(path)
    one_run = len(mlperf_lines())
    assert len(events) == one_run and dropped == 3 * one_run and bad == 1
    assert {e.rank for e in events} == {0}
    s = mllog.summarize(events, str(path))
    assert s.time_to_train_s == pytest.approx(30 * 60)  # rank 0's run_start -> run_stop
    assert s.run_start_ms == T0 + 1000
    assert [acc for _, acc in s.eval_accuracy] == [0.50, 0.70, 0.759]  # not 12 evaluations
    assert (s.status, s.epochs, s.final_metric, s.global_batch, s.platform) == (
        "success", 3.0, 0.759, 3264, "DGXA100")


def test_identical_lines_without_prefix_count_once(tmp_path):
    lines = mlperf_lines(minutes=20.0)
    path = tmp_path / "mllog.txt"
    path.write_text("\n".join(lines + lines) + "\n")  # e.g. a log tee'd twice
    events, dropped, _ = mllog.read_events(path)
    assert len(events) == len(lines) and dropped == len(lines)
    assert mllog.summarize(events).time_to_train_s == pytest.approx(20 * 60)


def test_missing_events_make_a_failed_run(tmp_path):
    lines = mlperf_lines()
    (tmp_path / "result_0.txt").write_text("\n".join(l for l in lines if C.RUN_STOP not in l))
    s = mllog.read_run_log(tmp_path / "result_0.txt")
    assert s.status == "failed" and "run_stop" in s.error and s.time_to_train_s is None
    (tmp_path / "result_1.txt").write_text("job killed before any logging\n")
    assert mllog.read_run_log(tmp_path / "result_1.txt").status == "failed"


def test_epoch_times_from_epoch_events(tmp_path):
    path = tmp_path / "mllog.txt"
    path.write_text("\n".join(mlperf_lines(epoch_s=90)))
    s = mllog.read_run_log(path)
    assert s.epoch_times_s == [90, 90, 90]


@pytest.mark.parametrize("name, layout", [
    ("DGXA100_2x8x56x1", (2, 8)), ("4x4", (4, 4)), ("config_1cc_04x08x32", (4, 8)),
    ("1xXE8545x4A100-SXM-80GB", (1, 4)), ("8xA100", (1, 8)),
    ("2xDSS8440x8A100-PCIE-40GB", (2, 8)), ("DSS8440x8A100-PCIE-40GB", (1, 8)),
    ("dgxa100_n1_ngc20.06_mxnet", None), ("resnet", None), ("XE8545", None),
])
def test_layout_from_folder_names(name, layout):
    assert mllog.layout_from_name(name) == layout


def published_tree(root, times=(30.0, 31.0, 33.0, 35.0, None), system="DGXA100_2x8x56x1"):
    """An MLCommons results tree: <org>/results/<system>/resnet/result_N.txt; None = aborted."""
    bench = root / "Org" / "results" / system / "resnet"
    bench.mkdir(parents=True)
    for i, minutes in enumerate(times):
        if minutes is None:  # an aborted run: did not reach the target
            lines = mlperf_lines(minutes=40.0, status=C.ABORTED, evals=((1, 0.5), (2, 0.6)))
        else:
            lines = mlperf_lines(minutes=minutes)
        (bench / f"result_{i}.txt").write_text("\n".join(f" 0: {l}" for l in lines) + "\n")
    return root


def test_published_logs_become_time_to_train(tmp_path):
    runs = mllog.read_mllog_dir(published_tree(tmp_path))
    assert len(runs) == 5
    assert {(r.nodes, r.gpus_per_node, r.world_size, r.layout, r.scale) for r in runs} == {(2, 8, 16, "2x8", "out")}
    assert sorted(r.status for r in runs) == ["aborted", "success", "success", "success", "success"]
    aborted = next(r for r in runs if r.status == "aborted")
    assert aborted.epochs == 2.0 and aborted.epochs_to_target is None and "aborted" in aborted.error
    assert {(r.model, r.devices, r.global_batch, r.mode) for r in runs} == {("resnet", "DGXA100", 3264, "time_to_accuracy")}

    [row] = build_tables(runs).time_to_train
    assert (row["runs"], row["converged"], row["aborted"]) == (5, 4, 1)
    assert row["ttt_min"] == pytest.approx((31 + 33 + 35) / 3)  # dropped: 30 and the aborted run
    assert row["ttt_mean_min"] == pytest.approx((30 + 31 + 33 + 35) / 4)
    assert row["epochs_mean"] == 3.0 and row["gpus"] == 16


def test_layout_from_the_log_then_system_json_then_folder(tmp_path):
    root = published_tree(tmp_path / "a", times=(10.0,), system="8xA100")
    assert mllog.read_mllog_dir(root)[0].layout == "1x8"  # folder name
    systems = root / "Org" / "systems"
    systems.mkdir()
    (systems / "8xA100.json").write_text(json.dumps({
        "system_name": "Big box", "number_of_nodes": "4", "accelerators_per_node": "2",
        "framework": "PyTorch NVIDIA Release 23.09"}))
    run = mllog.read_mllog_dir(root)[0]
    assert (run.layout, run.framework) == ("4x2", "pytorch")  # systems/<system>.json
    bench = root / "Org" / "results" / "8xA100" / "resnet"
    (bench / "result_0.txt").write_text("\n".join(mlperf_lines(layout=(2, 4))))
    assert mllog.read_mllog_dir(root)[0].layout == "2x4"  # number_of_nodes / accelerators_per_node


def test_empty_or_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(SchemaError, match="no result_"):
        mllog.read_mllog_dir(tmp_path)
    with pytest.raises(SchemaError, match="no such directory"):
        mllog.read_mllog_dir(tmp_path / "nope")
    bad = published_tree(tmp_path / "b", times=(10.0,))
    (bad / "Org" / "systems").mkdir()
    (bad / "Org" / "systems" / "DGXA100_2x8x56x1.json").write_text("{not json")
    with pytest.raises(SchemaError, match="DGXA100_2x8x56x1.json"):
        mllog.read_mllog_dir(bad)


def test_report_cli_reads_published_logs(tmp_path):
    root = published_tree(tmp_path / "pub", times=(30.0, 31.0, 33.0, 35.0, None))
    published_tree(tmp_path / "pub2", times=(12.0, 11.0, 10.0), system="DGXA100_4x8x28x1")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--mllog", str(root), "--mllog", str(tmp_path / "pub2"),
                                      "--out", str(out), "--format", "csv,md"])
    assert result.exit_code == 0, result.output
    assert "olympic mean of 3 of 5" in result.output
    lines = (out / "time_to_train.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    assert [(r["layout"], r["runs"], r["converged"], r["aborted"]) for r in rows] == [
        ("2x8", "5", "4", "1"), ("4x8", "3", "3", "0")]
    assert float(rows[0]["ttt_min"]) == pytest.approx(33)
    assert float(rows[1]["ttt_min"]) == pytest.approx(11)
    assert float(rows[1]["speedup"]) == pytest.approx(3)  # 33 min on 16 GPUs -> 11 on 32
    assert float(rows[1]["efficiency"]) == pytest.approx(1.5)
    assert not list(out.glob("*.png"))  # --format without png


def test_a_key_only_another_rank_logged_is_kept():
    lines = [f" 0: {l}" for l in mlperf_lines()]
    lines.append(' 2: :::MLLOG {"namespace": "", "time_ms": 5, "event_type": "POINT_IN_TIME", '
                 '"key": "tracked_stats", "value": {"throughput": 1234.5}, "metadata": {}}')
    events, dropped = mllog.dedupe(filter(None, map(mllog.parse_line, lines)))
    assert dropped == 0 and events[-1].rank == 2
    assert mllog.summarize(events).throughput == 1234.5


def test_published_bert_logs_count_samples_not_epochs(tmp_path):
    lines = mlperf_lines(evals=((2621440, 0.72),))
    lines = [l.replace('"resnet"', '"bert"') for l in lines]
    end = ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "train_samples", ' \
          '"value": 2621440, "metadata": {"file": "run_pretraining.py", "lineno": 1990}}' % (T0 + 10**7)
    (tmp_path / "result_0.txt").write_text("\n".join(lines + [end]))
    s = mllog.read_run_log(tmp_path / "result_0.txt")
    assert s.benchmark == "bert" and s.final_metric == 0.72
    assert s.epochs is None  # 2621440 is a sample count, and the training set size is not logged


def test_bert_epoch_num_is_a_sample_count_even_when_the_dataset_size_is_known(tmp_path):
    """epoch_num of a BERT log is samples: with train_samples logged before run_start, epochs are
    samples / training set size, never the sample count itself."""
    lines = [l.replace('"resnet"', '"bert"') for l in mlperf_lines(evals=((3000, 0.72),))]
    size = ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "train_samples", ' \
           '"value": 1000, "metadata": {"file": "x.py", "lineno": 1}}' % T0
    (tmp_path / "result_0.txt").write_text("\n".join([lines[0], size, *lines[1:]]))
    s = mllog.read_run_log(tmp_path / "result_0.txt")
    assert s.benchmark == "bert" and s.epochs == pytest.approx(3.0)  # 3000 samples of 1000


@pytest.mark.parametrize("name, family", [
    ("2xXE8545x4A100-SXM-80GB", "XE8545x4A100-SXM-80GB"), ("1xXE8545x4A100-SXM-80GB", "XE8545x4A100-SXM-80GB"),
    ("DGXA100_2x8x56x1", "DGXA100"), ("dgxa100_n8_ngc21.05_mxnet", "dgxa100_ngc21.05_mxnet"),
    ("1x2 cpu", "cpu"), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
])
def test_system_family_drops_the_size(name, family):
    assert mllog.system_family(name) == family


def test_reads_what_hvdbench_events_writes(tmp_path):
    """hvdbench's own writer (events.EventLog, on mlperf_logging) and this reader agree."""
    from hvdbench.events import EventLog

    def write(folder, evals, samples=False, throughput=None):
        log = EventLog(tmp_path / folder / "mllog.txt")
        log.submission("resnet", "hvdbench", "1x2 cpu", "open", "onprem")  # MLPerf's name for resnet50
        log.hyperparameters({C.GLOBAL_BATCH_SIZE: 64})
        log.event(C.TRAIN_SAMPLES, 1000)
        log.start(C.RUN_START)
        for value, count in evals:
            where = {C.EPOCH_NUM: count, C.SAMPLES_COUNT: count} if samples else {C.EPOCH_NUM: count}
            log.event(C.EVAL_ACCURACY, value, metadata=where)
        if throughput:
            log.event("tracked_stats", {"throughput": throughput}, metadata={"step": 20})
        log.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS if evals or throughput else C.ABORTED})
        log.close()

    write("tta", [(0.5, 1), (0.9, 2)])
    write("bert", [(0.4, 1500), (0.7, 2500)], samples=True)
    write("tput", [], throughput=812.5)
    runs = {Path(r.run_id).parent.name: r for r in mllog.read_mllog_dir(tmp_path)}
    tta, bert, tput = runs["tta"], runs["bert"], runs["tput"]
    assert (tta.mode, tta.status, tta.epochs, tta.final_metric, tta.global_batch) == (
        "time_to_accuracy", "success", 2.0, 0.9, 64)
    assert (tta.layout, tta.world_size, tta.devices, tta.model) == ("1x2", 2, "cpu", "resnet")
    assert tta.time_to_train_s is not None and tta.time_to_train_s >= 0
    assert bert.epochs == pytest.approx(2.5)  # 2500 samples / 1000 training samples
    assert (tput.mode, tput.throughput, tput.throughput_per_gpu, tput.time_to_train_s) == (
        "throughput", 812.5, 406.25, None)


def test_unreadable_lines_are_reported(tmp_path):
    root = published_tree(tmp_path / "pub", times=(10.0, 11.0))
    log = root / "Org" / "results" / "DGXA100_2x8x56x1" / "resnet" / "result_1.txt"
    log.write_text(log.read_text() + ' 0: :::MLLOG {"namespace": "", "time_ms": 17\n')
    runs, notes = mllog.load(root)
    assert len(runs) == 2 and all(r.status == "success" for r in runs)
    assert notes == [f"{root}: 1 unreadable :::MLLOG line(s) skipped in 1 file(s), first {log}"]
    result = CliRunner().invoke(cli, ["report", "--mllog", str(root), "--out", str(tmp_path / "r"), "--format", "md"])
    assert result.exit_code == 0 and notes[0] in result.output
