"""The :::MLLOG parser on logs written in the official line format (by mlperf_logging's own
MLLogger), with the launcher prefixes of srun -l, Open MPI and horovodrun, junk lines and every
rank logging: events counted once, runs scored as MLPerf scores them. Published folders of four
shapes (a submission tree with systems JSONs, NxGxBxA folder names, raw srun -l logs, a placeholder
platform two submitters share) come out with the right layouts, groups and counts, and the RCP
rescale is the official summarizer's, run here on the same files."""

import csv
import dataclasses
import io
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger
from mlperf_logging.rcp_checker import rcp_checker

from hvdbench.cli.main import cli
from hvdbench.errors import ConfigError
from hvdbench.results import mllog
from hvdbench.results.records.schema import SchemaError
from hvdbench.results.render.tables import markdown
from hvdbench.results.stats.aggregate import build_tables
from hvdbench.topology import Layout

T0 = 1_700_000_000_000  # ms


def mlperf_lines(minutes=30.0, status=C.SUCCESS, evals=((1, 0.50), (2, 0.70), (3, 0.759)),
                 platform="DGXA100", batch=3264, shift_ms=0, layout=None, epoch_s=None, benchmark="resnet",
                 org=None, throughput=None):
    """One run's events, written by mlperf_logging itself (exact official format)."""
    buf = io.StringIO()
    logger = logging.Logger(f"fixture{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    log = MLLogger(logger=logger)
    t = T0 + shift_ms
    log.event(C.SUBMISSION_BENCHMARK, benchmark, time_ms=t)
    if org:
        log.event(C.SUBMISSION_ORG, org, time_ms=t)
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
    if throughput:
        log.event(mllog.TRACKED_STATS, {"throughput": throughput}, metadata={"step": 10}, time_ms=t + 3000)
    log.end(C.RUN_STOP, metadata={C.STATUS: status}, time_ms=t + 1000 + int(minutes * 60_000))
    return buf.getvalue().splitlines()


def compliant_lines(minutes, epochs, *, division="open", batch=64, org="hvdbench", platform="1x2 cpu",
                    layout=None, status=C.SUCCESS, t0=T0, final=0.80):
    """A whole ResNet run's log that passes the official compliance checker (training 4.0.0), as
    hvdbench's worker writes it; closed division with ResNet's SGD keys. Evaluations every 4
    epochs and at `epochs` (where the accuracy reaches `final`)."""
    buf = io.StringIO()
    logger = logging.Logger(f"compliant{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    log = MLLogger(logger=logger)
    t = t0
    log.event(C.CACHE_CLEAR, False, time_ms=t)
    log.start(C.INIT_START, time_ms=t)
    header = [(C.SUBMISSION_BENCHMARK, "resnet"), (C.SUBMISSION_ORG, org), (C.SUBMISSION_DIVISION, division),
              (C.SUBMISSION_STATUS, "onprem"), (C.SUBMISSION_PLATFORM, platform)]
    if layout:
        header += [(mllog.NUMBER_OF_NODES, layout[0]), (mllog.ACCELERATORS_PER_NODE, layout[1])]
    header += [(C.SEED, 1), (C.GLOBAL_BATCH_SIZE, batch), (C.GRADIENT_ACCUMULATION_STEPS, 1), (C.OPT_NAME, "sgd"),
               (C.OPT_BASE_LR, 0.1)]
    if division == "closed":
        header += [("sgd_opt_base_learning_rate", 10.0), ("sgd_opt_end_learning_rate", 0.0001),
                   ("sgd_opt_learning_rate_decay_poly_power", 2), ("sgd_opt_learning_rate_decay_steps", 1000),
                   ("sgd_opt_weight_decay", 0.00005), ("sgd_opt_momentum", 0.9), ("model_bn_span", 32),
                   ("opt_learning_rate_warmup_epochs", 2)]
    header += [(C.TRAIN_SAMPLES, 1281167), (C.EVAL_SAMPLES, 50000)]
    for key, value in header:
        log.event(key, value, time_ms=t)
    log.end(C.INIT_STOP, time_ms=t + 500)
    start = t + 1000
    log.start(C.RUN_START, time_ms=start)
    per_epoch = minutes * 60_000 / epochs

    def done(e):  # the end of epoch e
        return start + e * per_epoch - 10
    for e in range(1, epochs + 1):
        log.start(C.EPOCH_START, metadata={C.EPOCH_NUM: e}, time_ms=start + (e - 1) * per_epoch)
        log.end(C.EPOCH_STOP, metadata={C.EPOCH_NUM: e}, time_ms=done(e) - 5)
        if e % 4 == 0 or e == epochs:
            log.start(C.EVAL_START, metadata={C.EPOCH_NUM: e}, time_ms=done(e) - 4)
            log.end(C.EVAL_STOP, metadata={C.EPOCH_NUM: e}, time_ms=done(e) - 2)
            accuracy = final if e == epochs else 0.4 + 0.3 * e / epochs
            log.event(C.EVAL_ACCURACY, accuracy, metadata={C.EPOCH_NUM: e}, time_ms=done(e) - 1)
    log.end(C.RUN_STOP, metadata={C.STATUS: status, C.EPOCH_NUM: epochs}, time_ms=start + minutes * 60_000)
    return buf.getvalue().splitlines()


def write(path, lines, prefix=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{prefix}{line}\n" for line in lines))
    return path


def system_json(path, name, nodes, gpus, submitter="Org", division="closed"):
    """A systems/<system>.json with every field the official checker asks for."""
    from hvdbench.results.export import SYSTEM_FIELDS

    desc = {**dict.fromkeys(SYSTEM_FIELDS, ""), "submitter": submitter, "division": division,
            "status": "Available on-premise", "system_name": name, "number_of_nodes": str(nodes),
            "host_processors_per_node": "2", "accelerators_per_node": str(gpus),
            "accelerator_model_name": "NVIDIA H100-SXM5-80GB", "framework": "PyTorch NVIDIA Release 24.04",
            "other_software_stack": {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(desc, indent=4))
    return path


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


def test_one_record_in_other_words_counts_once_and_a_different_value_twice(tmp_path):
    """Records sharing a time, type and key: the same record written in other words (key order,
    spacing) is one event, as with the texts compared or without; a different value is another."""
    record = ('"time_ms": 7, "event_type": "POINT_IN_TIME", "key": "tracked_stats", '
              '"value": {"throughput": 10.5, "step": 3}, "metadata": {"file": "a.py", "lineno": 1}')
    reworded = ('"metadata": {"lineno": 1, "file": "a.py"}, "value": {"step": 3, "throughput": 10.5}, '
                '"key": "tracked_stats", "event_type": "POINT_IN_TIME", "time_ms": 7')
    other = record.replace("10.5", "11.5")
    lines = [*mlperf_lines(), *(f":::MLLOG {{{r}}}" for r in (record, reworded, record, other))]
    path = tmp_path / "mllog.txt"
    path.write_text("\n".join(lines) + "\n")
    events, dropped, _ = mllog.read_events(path)
    stats = [e.value for e in events if e.key == "tracked_stats"]
    assert stats == [{"throughput": 10.5, "step": 3}, {"throughput": 11.5, "step": 3}] and dropped == 2
    kept, dropped_too = mllog.dedupe(filter(None, map(mllog.parse_line, lines)))  # without the texts
    assert [e._replace(lineno=0) for e in kept] == [e._replace(lineno=0) for e in events] and dropped_too == 2


def test_per_tensor_initialisation_records_are_counted_but_not_read(tmp_path):
    """weights_initialization, logged once per tensor by MLPerf's references (a quarter of a published
    round's records) and read by nothing here: counted among the marker lines, not among the events,
    whether in mlperf_logging's own words (passed over undecoded) or in others (decoded, then left out);
    the run read from the file is the same as without them."""
    buf = io.StringIO()
    logger = logging.Logger(f"init{id(buf)}")
    logger.addHandler(logging.StreamHandler(buf))
    MLLogger(logger=logger).event(C.WEIGHTS_INITIALIZATION, metadata={"tensor": "fc.weight"}, time_ms=T0)
    official = buf.getvalue().strip()
    assert '"key": "weights_initialization"' in official  # the words read_log passes over
    reworded = (':::MLLOG {"key":"weights_initialization","value":null,"time_ms":%d,"event_type":"POINT_IN_TIME",'
                '"metadata":{"tensor":"fc.bias"}}' % T0)
    plain = mlperf_lines()
    (tmp_path / "plain.txt").write_text("\n".join(plain) + "\n")
    (tmp_path / "init.txt").write_text("\n".join([plain[0], official, reworded, *plain[1:]]) + "\n")
    log, without = mllog.read_log(tmp_path / "init.txt"), mllog.read_log(tmp_path / "plain.txt")
    assert log.marker_lines == without.marker_lines + 2 and log.bad_lines == 0
    assert C.WEIGHTS_INITIALIZATION not in {e.key for e in log.events}
    assert [e.key for e in log.events] == [e.key for e in without.events]
    assert mllog.read_run_log(tmp_path / "init.txt").time_to_train_s == \
        mllog.read_run_log(tmp_path / "plain.txt").time_to_train_s


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
    ("DGXA100_2x8x56x1", (2, 8)), ("4x4", (4, 4)), ("config_1cc_04x08x32", (4, 8)), ("1x2 cpu", (1, 2)),
    ("1xXE8545x4A100-SXM-80GB", None), ("8xA100", None), ("16xBM.GPU.H100.8", None),
    ("dgxa100_n1_ngc20.06_mxnet", None), ("resnet", None), ("XE8545", None),
])
def test_nxgxbxa_names(name, layout):
    """Only the MLPerf config convention NODESxGPUS[xBATCHxACCUM] is a name's layout."""
    assert mllog.layout_from_name(name) == (Layout(*layout) if layout else None)


@pytest.mark.parametrize("text, layout", [
    ("DGXA100_2x8x56x1", (2, 8)), ("1x2 cpu", (1, 2)),
    ("1xXE8545x4A100-SXM-80GB", (1, 4)), ("2xDSS8440x8A100-PCIE-40GB", (2, 8)),  # N x server x G accelerators
    ("8xA100", (1, 8)), ("ESC8000A-E12-8xH100-PCIE-80GB", (1, 8)), ("4xMI250", (1, 4)),  # N accelerators
    ("8xNVIDIA DGX H100", (8, 8)), ("2xDGX-2", (2, 16)), ("16xBM.GPU.H100.8", (16, 8)),  # N servers
    ("DSS8440x8A100-PCIE-40GB", (1, 8)), ("XE8640x4H100-SXM-80GB", (1, 4)), ("R760xax4L40S", (1, 4)),
    ("GX2560M7_H100_SXM_80GBx4", (1, 4)),
    ("1xSUBMISSION_PLATFORM_PLACEHOLDER", None),  # one node, accelerators unknown
    ("dgxa100_n1_ngc20.06_mxnet", None), ("resnet", None), ("XE8545", None), ("Eos_n8", None),
])
def test_layout_from_platform_text(text, layout):
    """A size prefix on a server is nodes (8xNVIDIA DGX H100 is 8 nodes), on an accelerator GPUs."""
    assert mllog.layout_from_text(text) == (Layout(*layout) if layout else None)


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
    assert {(r.model, r.devices, r.global_batch, r.mode) for r in runs} == {
        ("resnet", "Org / DGXA100", 3264, "time_to_accuracy")}  # submitter (the folder above results/) / system
    assert {r.layout_source for r in runs} == {"NxGxBxA name (DGXA100_2x8x56x1)"}

    [row] = build_tables(runs).time_to_train
    assert (row.runs, row.converged, row.aborted) == (5, 4, 1)
    assert row.ttt_min == pytest.approx((31 + 33 + 35) / 3)  # dropped: 30 and the aborted run
    assert row.ttt_mean_min == pytest.approx((30 + 31 + 33 + 35) / 4)
    assert row.epochs_mean == 3.0 and row.gpus == 16


def test_layout_from_the_log_then_system_json_then_folder(tmp_path):
    root = published_tree(tmp_path / "a", times=(10.0,), system="8xA100")
    run = mllog.read_mllog_dir(root)[0]
    assert (run.layout, run.layout_source) == ("1x8", "system folder name (8xA100)")
    systems = root / "Org" / "systems"
    systems.mkdir()
    (systems / "8xA100.json").write_text(json.dumps({
        "system_name": "Big box", "number_of_nodes": "4", "accelerators_per_node": "2",
        "framework": "PyTorch NVIDIA Release 23.09"}))
    run = mllog.read_mllog_dir(root)[0]
    assert (run.layout, run.framework, run.devices) == ("4x2", "pytorch", "Org / Big box")  # systems/<system>.json
    assert run.layout_source == "systems JSON (8xA100.json)"
    bench = root / "Org" / "results" / "8xA100" / "resnet"
    (bench / "result_0.txt").write_text("\n".join(mlperf_lines(layout=(2, 4))))
    run = mllog.read_mllog_dir(root)[0]
    assert (run.layout, run.layout_source) == ("2x4", "log events")  # number_of_nodes / accelerators_per_node


def test_empty_or_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(SchemaError, match="no file holds a readable :::MLLOG event"):
        mllog.read_mllog_dir(tmp_path)
    with pytest.raises(SchemaError, match="no such directory"):
        mllog.read_mllog_dir(tmp_path / "nope")
    # A systems JSON that cannot be read is a warning naming it, the layout of its runs unknown: one bad
    # file of a published tree does not stop the report of the rest (issue 30).
    bad = published_tree(tmp_path / "b", times=(10.0,))
    (bad / "Org" / "systems").mkdir()
    desc = bad / "Org" / "systems" / "DGXA100_2x8x56x1.json"
    desc.write_text("{not json")
    [run], notes = mllog.load(bad)
    assert (run.layout, run.status) == ("", "success")
    assert run.layout_source.startswith(f"unknown ({desc.absolute()}: not valid JSON")
    assert [n for n in notes if n.startswith("warning:")] == [
        f"warning: {desc.absolute()}: not valid JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)); not read for layouts: its runs' come from their logs, else are unknown"]


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
    ("1x2 cpu", "cpu"), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"), ("Eos_n8", "Eos"),
    ("16xBM.GPU.H100.8", "BM.GPU.H100.8"), ("Acme H100 2-node", "Acme H100"), ("Box (4 nodes)", "Box"),
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
        time.sleep(0.002)  # a run_stop in run_start's millisecond is an impossible time to train: dropped
        log.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS if evals or throughput else C.ABORTED})
        log.close()

    write("tta", [(0.5, 1), (0.9, 2)])
    write("bert", [(0.4, 1500), (0.7, 2500)], samples=True)
    write("tput", [], throughput=812.5)
    runs = {Path(r.run_id).parent.name: r for r in mllog.read_mllog_dir(tmp_path)}
    tta, bert, tput = runs["tta"], runs["bert"], runs["tput"]
    assert (tta.mode, tta.status, tta.epochs, tta.final_metric, tta.global_batch) == (
        "time_to_accuracy", "success", 2.0, 0.9, 64)
    assert (tta.layout, tta.world_size, tta.devices, tta.model) == ("1x2", 2, "hvdbench / cpu", "resnet")
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
    assert notes == [f"{root}: 2 run(s) from 2 log file(s)",
                     f"{root}: 1 unreadable :::MLLOG line(s) skipped in 1 file(s), first {log}:9"]
    result = CliRunner().invoke(cli, ["report", "--mllog", str(root), "--out", str(tmp_path / "r"), "--format", "md"])
    assert result.exit_code == 0 and notes[1] in result.output
    assert notes[1] in (tmp_path / "r" / "summary.md").read_text()  # the inputs are in summary.md too


# --- published folders of four shapes ------------------------------------------------------------

def shape_submission_tree(root):
    """1) An MLCommons submission tree with systems JSONs: a 1/2/4/8-node campaign of one system
    whose platform text says `8xH100` everywhere (read alone: one node of 8, four times)."""
    org = root / "training_results_v4.0" / "NVIDIA"
    for nodes in (1, 2, 4, 8):
        system = f"eos_n{nodes}_ngc24.04_pytorch"
        system_json(org / "systems" / f"{system}.json", f"Eos_n{nodes}", nodes, 8, submitter="NVIDIA", division="open")
        for i in range(5):
            write(org / "results" / system / "resnet" / f"result_{i}.txt",
                  mlperf_lines(minutes=40.0 / nodes + i / 10, platform="8xH100", org="NVIDIA"))
    return root / "training_results_v4.0"


def shape_nxgxbxa_names(root):
    """2) Folders named the MLPerf config way NODESxGPUSxBATCHxACCUM, no systems JSON; the platform
    text `8xNVIDIA DGX H100` (8 nodes) is wrong for all but one of them."""
    for nodes, batch in ((1, 56), (2, 28), (4, 14)):
        for i in range(3):
            write(root / "campaign" / f"DGXH100_{nodes}x8x{batch}x1" / f"run{i}" / "mllog.txt",
                  mlperf_lines(minutes=30.0 / nodes, platform="8xNVIDIA DGX H100", org="Cluster"))
    return root / "campaign"


def shape_raw_srun_logs(root):
    """3) A cloud vendor's raw Slurm logs: `*.log` and `slurm-*.out`, every rank's lines behind
    `srun -l` prefixes, the platform text the only layout source; one job ran two trials; code,
    a binary and a log without MLLOG lines lie beside them."""
    vendor = root / "vendor-logs"
    for nodes in (1, 2):
        for i in range(3):
            lines = []
            for rank in reversed(range(nodes * 8)):  # every rank logs every event
                lines += [f"{rank:>2}: {line}" for line in mlperf_lines(
                    minutes=20.0 / nodes + i, shift_ms=rank * 3, platform=f"{nodes}xNVIDIA DGX H100", org="Cloud",
                    throughput=1000.0 * nodes)]
            name = f"resnet-{nodes}node/slurm-{100 + i}.out" if i else f"resnet-{nodes}node/train_{nodes}n.log"
            write(vendor / name, ["srun: job started"] + sorted(lines, key=lambda l: l[4:]))
    # one Slurm job looping over two trials: two runs in one file
    two = [f" 0: {l}" for l in mlperf_lines(minutes=11.0, platform="1xNVIDIA DGX H100", org="Cloud")]
    two += [f" 0: {l}" for l in mlperf_lines(minutes=12.0, shift_ms=10**8, platform="1xNVIDIA DGX H100", org="Cloud")]
    write(vendor / "resnet-1node" / "slurm-200.out", two)
    write(vendor / "run.sub", ['echo ":::MLLOG {\\"key\\": \\"run_start\\"}"'])  # code quoting the marker
    write(vendor / "notes.txt", ["no events here"])
    (vendor / "core.bin").write_bytes(b"\0\1:::MLLOG\0")
    write(vendor / "resnet-2node" / "broken.log", [":::MLLOG {not json"])
    write(vendor / "power" / "result_0" / "node_0.txt", [  # an MLPerf power log: no run in it
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "power_reading", '
        '"value": 2795, "metadata": ""}'])
    return vendor


def shape_shared_placeholder(root):
    """4) Two submitters whose logs say the same placeholder platform; their system folders differ."""
    for org, system, minutes in (("A", "1xXE8640x4H100-SXM-80GB", 30.0), ("B", "ESC8000A-8xH100-PCIE", 15.0)):
        for i in range(5):
            write(root / "pub" / org / "results" / system / "resnet" / f"result_{i}.txt",
                  mlperf_lines(minutes=minutes + i, platform="SUBMISSION_PLATFORM_PLACEHOLDER", org=org))
    return root / "pub"


def rows_of(runs):
    tables = build_tables(runs)
    return [(r.system, r.layout, r.scale, r.runs, r.layout_source) for r in tables.time_to_train]


def test_a_submission_tree_takes_its_layouts_from_the_systems_json(tmp_path):
    runs, notes = mllog.load(shape_submission_tree(tmp_path))
    assert rows_of(runs) == [
        ("NVIDIA / Eos", "1x8", "up", 5, "systems JSON (eos_n1_ngc24.04_pytorch.json)"),
        ("NVIDIA / Eos", "2x8", "out", 5, "systems JSON (eos_n2_ngc24.04_pytorch.json)"),
        ("NVIDIA / Eos", "4x8", "out", 5, "systems JSON (eos_n4_ngc24.04_pytorch.json)"),
        ("NVIDIA / Eos", "8x8", "out", 5, "systems JSON (eos_n8_ngc24.04_pytorch.json)")]
    assert notes == [f"{tmp_path / 'training_results_v4.0'}: 20 run(s) from 20 log file(s); 4 file(s) skipped: "
                     "4 code, configuration or documents (e.g. NVIDIA/systems/eos_n1_ngc24.04_pytorch.json)"]
    row = build_tables(runs).time_to_train[-1]
    assert row.speedup == pytest.approx(40.2 / 5.2)  # one group: a speed-up per layout (olympic means)
    assert (row.rcp_check, row.ruleset) == ("not checked", "4.0.0")  # open division; v4.0 from the path


def test_nxgxbxa_folder_names_come_before_the_platform_text(tmp_path):
    runs, _ = mllog.load(shape_nxgxbxa_names(tmp_path))
    assert rows_of(runs) == [
        ("Cluster / NVIDIA DGX H100", "1x8", "up", 3, "NxGxBxA name (DGXH100_1x8x56x1)"),
        ("Cluster / NVIDIA DGX H100", "2x8", "out", 3, "NxGxBxA name (DGXH100_2x8x28x1)"),
        ("Cluster / NVIDIA DGX H100", "4x8", "out", 3, "NxGxBxA name (DGXH100_4x8x14x1)")]


def test_raw_srun_logs_are_read_and_skipped_files_are_counted(tmp_path):
    root = shape_raw_srun_logs(tmp_path)
    runs, notes = mllog.load(root)
    assert rows_of(runs) == [
        ("Cloud / NVIDIA DGX H100", "1x8", "up", 5, "platform text (1xNVIDIA DGX H100)"),
        ("Cloud / NVIDIA DGX H100", "2x8", "out", 3, "platform text (2xNVIDIA DGX H100)")]
    assert sorted(r.run_id for r in runs if "slurm-200" in r.run_id) == [
        "resnet-1node/slurm-200.out#1", "resnet-1node/slurm-200.out#2"]  # two trials in one job's log
    one = next(r for r in runs if r.run_id == "resnet-2node/train_2n.log")
    assert one.time_to_train_s == pytest.approx(10 * 60)  # rank 0's events, each once, among 16 ranks'
    assert notes[0] == (f"{root}: 8 run(s) from 7 log file(s); 5 file(s) skipped: "
                        "1 binary (e.g. core.bin), 1 code, configuration or documents (e.g. run.sub), "
                        "1 with only unreadable :::MLLOG lines (e.g. resnet-2node/broken.log), "
                        "1 without :::MLLOG lines (e.g. notes.txt), "
                        "1 without run events (power readings or the like) (e.g. power/result_0/node_0.txt)")
    scaling = build_tables(runs).scaling  # tracked_stats throughput, where the logs have it
    assert [(r.layout, r.throughput_mean, r.n_throughput) for r in scaling] == [
        ("1x8", 1000.0, 3), ("2x8", 2000.0, 3)]


def test_a_shared_placeholder_platform_does_not_pool_two_submitters(tmp_path):
    root = shape_shared_placeholder(tmp_path)
    runs, _ = mllog.load(root)
    assert rows_of(runs) == [
        ("A / XE8640x4H100-SXM-80GB", "1x4", "up", 5, "system folder name (1xXE8640x4H100-SXM-80GB)"),
        ("B / ESC8000A-H100-PCIE", "1x8", "up", 5, "system folder name (ESC8000A-8xH100-PCIE)")]
    # --group-by names another grouping: by the platform text the two pool into one group
    runs, _ = mllog.load(root, group_by="platform")
    assert {r.devices for r in runs} == {"SUBMISSION_PLATFORM_PLACEHOLDER"}
    with pytest.raises(ConfigError, match="joined keys of submitter, system, platform"):
        mllog.load(root, group_by="submitter+colour")


def test_report_cli_on_the_four_shapes(tmp_path):
    roots = [shape(tmp_path) for shape in (shape_submission_tree, shape_nxgxbxa_names, shape_raw_srun_logs,
                                           shape_shared_placeholder)]
    out = tmp_path / "report"
    args = ["report", *[a for root in roots for a in ("--mllog", str(root))], "--out", str(out), "--format", "csv,md"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    with open(out / "time_to_train.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 + 3 + 2 + 2 and len({r["system"] for r in rows}) == 5
    summary = (out / "summary.md").read_text()
    assert "Layout from: 1x8 systems JSON (eos_n1_ngc24.04_pytorch.json); 2x8 systems JSON" in summary
    assert "Layout from: 1x8 platform text (1xNVIDIA DGX H100); 2x8 platform text (2xNVIDIA DGX H100)." in summary
    assert "1 without :::MLLOG lines (e.g. notes.txt)" in summary  # the inputs, with what was skipped
    assert summary in result.output
    bad = CliRunner().invoke(cli, ["report", "--mllog", str(roots[0]), "--group-by", "colour", "--out", str(out)])
    assert bad.exit_code == 1 and "--group-by 'colour'" in bad.output


# --- sample-based logs (BERT) ---------------------------------------------------------------------

def test_bert_logs_show_samples_to_target_not_a_wrong_epoch_time(tmp_path):
    """A published BERT log counts samples in epoch_num and brackets the whole run with one
    epoch_start/epoch_stop: no epochs and no time per epoch, but samples and time per 1M samples."""
    for i, (minutes, samples) in enumerate(((20.0, 2_500_000), (21.0, 2_600_000), (22.0, 2_700_000))):
        lines = mlperf_lines(minutes=minutes, evals=((samples // 2, 0.70), (samples, 0.721)), epoch_s=None,
                             benchmark="bert", batch=448, org="Org")
        start = ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "INTERVAL_START", "key": "epoch_start", ' \
                '"value": null, "metadata": {"epoch_num": 0}}' % (T0 + 1000)
        stop = ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "INTERVAL_END", "key": "epoch_stop", ' \
               '"value": null, "metadata": {"epoch_num": %d}}' % (T0 + 1000 + minutes * 60_000, samples)
        write(tmp_path / "Org" / "results" / "box_1x8x56x1" / "bert" / f"result_{i}.txt", [start, *lines, stop])
    runs = mllog.read_mllog_dir(tmp_path)
    assert {(r.epochs, r.time_per_epoch_s) for r in runs} == {(None, None)}
    [row] = build_tables(runs).time_to_train
    assert row.samples_to_target_mean == pytest.approx(2_600_000)
    assert row.time_per_1m_samples_min == pytest.approx((20 / 2.5 + 21 / 2.6 + 22 / 2.7) / 3)
    assert (row.epochs_mean, row.time_per_epoch_min) == (None, None)
    text = markdown(build_tables(runs))
    assert "| samples to target | min per 1M samples |" in text and "| epochs | min/epoch |" not in text
    assert "| 1x8 | 8 | 448 | 3 | 3 | eval_accuracy 0.721 (target –) | 2,600,000 | 8.08 | 21.00 |" in text


@pytest.mark.parametrize("block", [64, 1000, 1 << 22])
def test_a_log_reads_the_same_in_blocks_of_any_size(tmp_path, monkeypatch, block):
    """read_log reads a file in blocks of whole lines (events.BLOCK): a line longer than a block, line
    ends CR LF and CR, an unreadable :::SYSJSON line before a readable one and an unreadable marker
    line are read with the same events and line numbers whatever the block."""
    lines = mlperf_lines(minutes=10.0)
    lines[1] = "x" * 300 + " " + lines[1]  # longer than the smallest block
    lines.insert(2, ":::SYSJSON {not json")
    lines.insert(3, ":::SYSJSON " + json.dumps({"system_name": "box"}))
    lines.insert(4, ':::MLLOG {"namespace": "", "time_ms": 12')
    path = tmp_path / "run.log"
    path.write_bytes("\r\n".join(lines[:6]).encode() + b"\r" + "\n".join(lines[6:]).encode() + b"\n")
    monkeypatch.setattr(mllog.events, "BLOCK", block)
    log = mllog.read_log(path)
    assert (log.sysjson, log.sysjson_line, log.bad_lines, log.first_bad_line) == ({"system_name": "box"}, 4, 1, 5)
    assert [e.lineno for e in log.events] == [1, 2, *range(6, len(lines) + 1)]
    assert [e.key for e in log.events] == [json.loads(line.split(":::MLLOG", 1)[1])["key"]
                                           for i, line in enumerate(lines) if ":::MLLOG" in line and i != 4]


# --- reference convergence points: ours against the official summarizer ---------------------------

def summarize_officially(org, cwd):
    """`python -m mlperf_logging.result_summarizer ORG training 4.0.0`: {system folder: {benchmark
    column: value}} from its detailed CSV."""
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(org), "training", "4.0.0",
                           "--csv", "summary.csv"], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(Path(cwd) / "summary_detailed.csv", newline="") as f:
        return {row["details_url"].rsplit("/", 1)[-1].removesuffix(".json"): row for row in csv.DictReader(f)}


def test_rcp_rescale_is_the_official_summarizers(tmp_path):
    """Closed-division ResNet: at batch 1632 (RCP mean 35.0 epochs, lowest accepted mean 33.80)
    runs converging in 34 epochs pass and are rescaled x 35/34; at batch 3264 (RCP 35.15, lowest
    34.31) runs converging in 33 epochs fail. The summarizer, run twice on the same tree (its first
    run's RCP check writes scaling.json, as the package checker would; the second applies it),
    agrees with the report on both."""
    org = tmp_path / "training_results_v4.0" / "Org"
    for system, nodes, batch, epochs in (("box_n1", 1, 1632, 34), ("box_n2", 2, 3264, 33)):
        system_json(org / "systems" / f"{system}.json", "Box", nodes, 8)
        for i, minutes in enumerate((30.0, 31.0, 33.0, 35.0, 36.0)):
            write(org / "results" / system / "resnet" / f"result_{i}.txt",
                  compliant_lines(minutes / nodes, epochs, division="closed", batch=batch, org="Org",
                                  platform=f"{nodes}xBox", t0=T0 + i * 10**8))
    runs, _ = mllog.load(tmp_path)  # ruleset 4.0.0 from training_results_v4.0 in the path
    rows = {r.layout: r for r in build_tables(runs).time_to_train}
    passed, failed = rows["1x8"], rows["2x8"]
    assert (passed.rcp_check, failed.rcp_check) == ("Pass", "Fail")
    assert passed.rcp_factor == pytest.approx(35.0 / 34.0) and failed.rcp_factor == 1.0
    assert (passed.rcp_mean, passed.converge_mean) == (pytest.approx(35.0), pytest.approx(34.0))
    assert failed.converge_mean == pytest.approx(33.0) and failed.rcp_min == pytest.approx(34.31, abs=0.01)
    assert passed.ttt_min == pytest.approx(33.0)  # raw olympic mean of 31, 33, 35
    assert passed.ttt_rcp_min == pytest.approx(33.0 * 35.0 / 34.0)

    summarize_officially(org, tmp_path)  # writes results/box_n1/resnet/scaling.json
    official = summarize_officially(org, tmp_path)
    assert (org / "results" / "box_n1" / "resnet" / "scaling.json").is_file()
    assert official["box_n1"]["resnet:RCP"] == "Pass" and official["box_n2"]["resnet:RCP"] == "Fail"
    for system, row in (("box_n1", passed), ("box_n2", failed)):
        assert float(official[system]["resnet:rcp_scaling_factor"]) == pytest.approx(row.rcp_factor, rel=1e-12)
        assert float(official[system]["resnet:time_to_train"]) == pytest.approx(row.ttt_rcp_min, rel=1e-12)
        assert float(official[system]["resnet:samples_to_converge"]) == pytest.approx(row.converge_mean)

    # the published scaling.json is now beside the logs: read again, the report agrees with it
    again = {r.layout: r for r in build_tables(mllog.load(tmp_path)[0]).time_to_train}
    assert "published scaling.json" not in again["1x8"].rcp_note
    text = markdown(build_tables(runs))
    assert "| 33.00 | 33.97 | Pass ×1.0294 (34 vs RCP 35) |" in text
    assert "| 16.50 | 16.50 | Fail (33 vs lowest accepted 34.3096) |" in text


def test_rcp_checks_share_a_table_and_each_says_what_it_says_alone(tmp_path):
    """A benchmark's RCP table is built once a process and each check gets its own copy (rcp.py): a
    check after others of the same benchmark says what it says alone; mlperf-logging's RCP_Checker is
    its own class again after every check, one that raised included (a ruleset without RCPs)."""
    checker = rcp_checker.RCP_Checker
    groups = {}
    for system, nodes, batch, epochs in (("box_n1", 1, 1632, 34), ("box_n2", 2, 3264, 33)):
        for i, minutes in enumerate((30.0, 31.0, 33.0, 35.0, 36.0)):
            write(tmp_path / "training_results_v4.0" / "Org" / "results" / system / "resnet" / f"result_{i}.txt",
                  compliant_lines(minutes / nodes, epochs, division="closed", batch=batch, org="Org",
                                  platform=f"{nodes}xBox", t0=T0 + i * 10**8))
    for run in mllog.load(tmp_path)[0]:
        groups.setdefault(run.global_batch, []).append(run)
    checks = [mllog.rcp_check(groups[batch]) for batch in (1632, 3264, 1632, 3264)]
    assert [c.check for c in checks] == ["Pass", "Fail", "Pass", "Fail"]
    assert checks[0] == checks[2] and checks[1] == checks[3]
    assert checks[0].factor == pytest.approx(35.0 / 34.0) and checks[1].rcp_min == pytest.approx(34.31, abs=0.01)
    assert rcp_checker.RCP_Checker is checker
    unknown = mllog.rcp_check([dataclasses.replace(run, ruleset="0.7.0") for run in groups[1632]])
    assert unknown.check == "No RCP" and "RCP Checker only supported in" in unknown.note
    assert rcp_checker.RCP_Checker is checker


def test_rcp_not_checked_where_the_summarizer_does_not_check(tmp_path):
    root = tmp_path / "logs"
    for i in range(2):  # closed, but fewer than 3 runs (each its own: a run of another start)
        write(root / "Org" / "results" / "box_1x8x204x1" / "resnet" / f"result_{i}.txt",
              compliant_lines(30.0, 34, division="closed", batch=1632, org="Org", t0=T0 + 3_600_000 * i))
    for i in range(3):  # open division
        write(root / "Org" / "results" / "box_2x8x204x1" / "resnet" / f"result_{i}.txt",
              compliant_lines(15.0, 34, division="open", batch=3264, org="Org", t0=T0 + 3_600_000 * i))
    runs, notes = mllog.load(root)
    rows = {r.layout: r for r in build_tables(runs).time_to_train}
    assert (rows["1x8"].rcp_check, rows["1x8"].rcp_note) == (
        "not checked", "2 run(s): the checker's olympic mean needs 3")
    assert rows["2x8"].rcp_note.startswith("open division: the summarizer checks RCPs in the closed division only")
    assert rows["2x8"].ttt_rcp_min == rows["2x8"].ttt_min == pytest.approx(15.0)
    assert any("ruleset 4.0.0 (no training_results_vX.Y folder in the path" in n for n in notes)
    rows = {r.layout: r for r in build_tables(mllog.load(root, ruleset="3.1.0")[0]).time_to_train}
    assert rows["2x8"].ruleset == "3.1.0"


@pytest.mark.parametrize("text, framework", [
    ("PyTorch NVIDIA Release 24.04", "pytorch"), ("NVIDIA NeMo Framework Release 24.04", "nemo"),
    ("MXNet NVIDIA Release 24.04 or PyTorch NVIDIA Release 24.04", ""),  # which one ran is not said
    ("CUDA 12.3", ""), ("", ""),
])
def test_framework_from_a_systems_json(text, framework):
    assert mllog.framework_of(text) == framework


def test_a_trailing_node_count_in_a_system_name_is_its_size(tmp_path):
    """Supermicro names its 1- and 8-node systems SYS-421GE-TNHR2-LCC-1 and -8: one system."""
    org = tmp_path / "Supermicro"
    for nodes in (1, 8):
        system = f"SYS-421GE-TNHR2-LCC-{nodes}"
        system_json(org / "systems" / f"{system}.json", system, nodes, 8, submitter="Supermicro", division="open")
        for i in range(3):
            write(org / "results" / system / "resnet" / f"result_{i}.txt", mlperf_lines(minutes=24.0 / nodes + i))
    rows = build_tables(mllog.read_mllog_dir(tmp_path)).time_to_train
    assert [(r.system, r.layout, r.speedup) for r in rows] == [
        ("Supermicro / SYS-421GE-TNHR2-LCC", "1x8", 1.0), ("Supermicro / SYS-421GE-TNHR2-LCC", "8x8", 25.0 / 4.0)]


# --- bad input (issue 30): numbers that are not finite, counts past the hostfiles' bounds ------------

def _edit(lines, key, old, new):
    """The log's lines with `old` replaced by `new` in the first line holding `"key": "<key>"`."""
    at = next(i for i, line in enumerate(lines) if f'"key": "{key}"' in line and old in line)
    return [*lines[:at], lines[at].replace(old, new), *lines[at + 1:]], at + 1


@pytest.mark.parametrize("key, old, new, said", [
    (C.EVAL_ACCURACY, '"value": 0.759', '"value": Infinity', "value Infinity (not a finite number)"),
    (C.EVAL_ACCURACY, '"value": 0.759', '"value": NaN', "value NaN (not a finite number)"),
    (C.EVAL_ACCURACY, '"value": 0.759', '"value": 1e999', "value Infinity (not a finite number)"),
    (C.EVAL_ACCURACY, '"value": 0.759', '"value": {"BBOX": -Infinity}', "value.BBOX -Infinity (not a finite number)"),
    (C.EVAL_ACCURACY, '"epoch_num": 3', '"epoch_num": NaN', "metadata.epoch_num NaN (not a finite number)"),
])
def test_a_non_finite_accuracy_is_missing_and_never_converged(tmp_path, key, old, new, said):
    lines, lineno = _edit(mlperf_lines(minutes=10.0), key, old, new)
    log = write(tmp_path / "pub" / "run.log", lines)
    [run], notes = mllog.load(tmp_path / "pub")
    assert run.status == "failed" and run.epochs_to_target is None and run.final_metric == 0.70
    assert run.error == f"eval_accuracy at line {lineno}: {said}: not converged"
    assert f"warning: {log}:{lineno}: eval_accuracy {said}: read as missing, and its run does not count as " \
           "converged" in notes
    [row] = build_tables([run]).time_to_train
    assert (row.runs, row.converged, row.failed) == (1, 0, 1)


@pytest.mark.parametrize("key, old, new, said, field, expected", [
    (C.RUN_STOP, '"time_ms": 1700000601000', '"time_ms": Infinity', "time_ms Infinity (not a finite number)",
     "status", "failed"),
    (C.RUN_STOP, '"time_ms": 1700000601000', '"time_ms": 1e308', "time_ms 1e+308 (past ±1e+150",
     "time_to_train_s", None),
    # time_ms as text: the JSON decoder reads no number, float() makes one of it (it was read as infinite)
    (C.RUN_STOP, '"time_ms": 1700000601000', '"time_ms": "inf"', "time_ms Infinity (not a finite number)",
     "status", "failed"),
    (mllog.TRACKED_STATS, '{"throughput": 100.0}', '{"throughput": NaN}',
     "value.throughput NaN (not a finite number)", "throughput", None),
    (C.GLOBAL_BATCH_SIZE, '"value": 3264', '"value": -Infinity', "value -Infinity (not a finite number)",
     "global_batch", 0),
    (C.GLOBAL_BATCH_SIZE, '"value": 3264', '"value": ' + "9" * 400, "value a 400-digit number (past ±1e+150",
     "global_batch", 0),
])
def test_a_non_finite_number_is_read_as_missing_with_a_warning(tmp_path, key, old, new, said, field, expected):
    lines, lineno = _edit(mlperf_lines(minutes=10.0, throughput=100.0), key, old, new)
    log = write(tmp_path / "pub" / "run.log", lines)
    [run], notes = mllog.load(tmp_path / "pub")
    assert getattr(run, field) == expected
    assert any(n.startswith(f"warning: {log}:{lineno}: {key} {said}") and n.endswith("read as missing")
               for n in notes), notes


def test_report_of_logs_with_infinities_writes_finite_csvs_and_plots(tmp_path):
    bench = tmp_path / "pub" / "Org" / "results" / "DGXA100_1x8x56x1" / "resnet"
    for i, minutes in enumerate((10.0, 11.0, 12.0, 13.0)):
        lines = mlperf_lines(minutes=minutes, throughput=100.0)
        if i == 0:
            lines, _ = _edit(lines, C.EVAL_ACCURACY, '"value": 0.759', '"value": Infinity')
        if i == 1:
            lines, _ = _edit(lines, mllog.TRACKED_STATS, '{"throughput": 100.0}', '{"throughput": 1e999}')
        write(bench / f"result_{i}.txt", lines)
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--mllog", str(tmp_path / "pub"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Traceback" not in result.output
    for csv_file in out.glob("*.csv"):
        text = csv_file.read_text().lower()
        assert "inf" not in text.replace("info", "") and "nan" not in text, csv_file
    rows = list(csv.DictReader((out / "time_to_train.csv").open()))
    assert [(r["runs"], r["converged"], r["failed"]) for r in rows] == [("4", "3", "1")]
    assert (out / "time_to_train.png").is_file()
    assert "result_0.txt:" in result.output and "does not count as converged" in result.output


@pytest.mark.parametrize("nodes, gpus, key, said", [
    (-1, 8, "number_of_nodes", "-1 is not a whole number from 1 to 1,000,000"),
    ("9" * 300, 8, "number_of_nodes", "'99999999999999999999...' (300 characters) is not a whole number from 1 "
                                      "to 1,000,000"),
    (10 ** 300, 8, "number_of_nodes", "10000000000000000000... is not a whole number from 1 to 1,000,000"),
    (1_000_001, 8, "number_of_nodes", "1000001 is not a whole number from 1 to 1,000,000"),
    (2, 1025, "accelerators_per_node", "1025 is not a whole number from 1 to 1,024"),
    (2, "eight", "accelerators_per_node", "'eight' is not a whole number from 1 to 1,024"),
    (2, "٨", "accelerators_per_node", "'٨' is not a whole number"),  # an Arabic-Indic eight: int() reads it
    (2, 2.5, "accelerators_per_node", "2.5 is not a whole number"),
    (True, 8, "number_of_nodes", "true is not a whole number"),
])
def test_a_systems_json_count_out_of_bounds_leaves_the_layout_unknown(tmp_path, nodes, gpus, key, said):
    root = published_tree(tmp_path / "pub", times=(10.0, 11.0, 12.0), system="8xA100")
    desc = system_json(root / "Org" / "systems" / "8xA100.json", "Big box", 1, 8)
    desc.write_text(json.dumps({**json.loads(desc.read_text()), "number_of_nodes": nodes,
                                "accelerators_per_node": gpus}))
    runs, notes = mllog.load(root)
    assert {(r.layout, r.nodes, r.gpus_per_node) for r in runs} == {("", 0, 0)}  # not the folder name's 1x8
    warning = f"warning: {desc.absolute()}: {key} {said}"
    assert [n for n in notes if n.startswith("warning:")] == [n for n in notes if n.startswith(warning)]
    assert len([n for n in notes if n.startswith("warning:")]) == 1  # once for its three runs
    assert all(r.layout_source.startswith(f"unknown ({desc.absolute()}: {key}") for r in runs)
    assert next(n for n in notes if n.startswith(warning)).endswith(
        "; not read for layouts: its runs' come from their logs, else are unknown")
    # a log that gives its own layout still has it, and the systems JSON is still named
    bench = root / "Org" / "results" / "8xA100" / "resnet"
    write(bench / "result_0.txt", mlperf_lines(layout=(2, 4)))
    runs, notes = mllog.load(root)
    assert sorted(r.layout for r in runs) == ["", "", "2x4"]
    assert len([n for n in notes if n.startswith(warning)]) == 1


def test_counts_in_log_events_and_sysjson_lines_are_held_to_the_same_bounds(tmp_path):
    write(tmp_path / "pub" / "a.log", mlperf_lines(layout=(-1, 8)))  # four runs, started an hour apart
    write(tmp_path / "pub" / "b.log", [":::SYSJSON " + json.dumps({"number_of_nodes": "2",
                                                                   "accelerators_per_node": "1" * 30})]
          + mlperf_lines(shift_ms=3_600_000))
    write(tmp_path / "pub" / "c.log", mlperf_lines(platform="99999999x8 cpu", shift_ms=7_200_000))  # no layout, no warning
    write(tmp_path / "pub" / "d.log", mlperf_lines(layout=(1_000_000, 1024), shift_ms=10_800_000))  # the largest allowed
    runs, notes = mllog.load(tmp_path / "pub")
    layouts = {Path(r.run_id).name: r.layout for r in runs}
    assert layouts == {"a.log": "", "b.log": "", "c.log": "", "d.log": "1000000x1024"}
    warnings = [n for n in notes if n.startswith("warning:")]
    assert warnings == [
        f"warning: {tmp_path / 'pub' / 'a.log'}:4: number_of_nodes -1 is not a whole number from 1 to 1,000,000; "
        "the layout of its run(s) is unknown",
        f"warning: {tmp_path / 'pub' / 'b.log'}:1 (:::SYSJSON): accelerators_per_node '11111111111111111111...' "
        "(30 characters) is not a whole number from 1 to 1,024; the layout of its run(s) is unknown"]


@pytest.mark.parametrize("name", ["99999999x8", "2x" + "9" * 5000, "٢x٨"])
def test_names_past_the_bounds_are_not_layouts(name):
    assert mllog.layout_from_name(name) is None and mllog.layout_from_text(name) is None


def test_deeply_nested_or_huge_json_is_an_unreadable_line_not_a_crash(tmp_path):
    lines = mlperf_lines() + [":::MLLOG " + "[" * 100_000, ':::MLLOG {"time_ms": ' + "9" * 400 + ', "key": "x"}',
                              ":::SYSJSON " + "{" * 100_000]
    write(tmp_path / "pub" / "run.log", lines)
    [run], notes = mllog.load(tmp_path / "pub")
    assert run.status == "success"
    assert f"2 unreadable :::MLLOG line(s) skipped in 1 file(s), first {tmp_path / 'pub' / 'run.log'}:" in notes[1]


# --- published trees the official summarizer reads otherwise (issue 27, item 5) -------------------

def submission_runs(org_dir, system, minutes=(30.0, 31.0, 32.0, 33.0, 34.0), **kw):
    for i, m in enumerate(minutes):
        write(org_dir / "results" / system / "resnet" / f"result_{i}.txt", mlperf_lines(minutes=m, **kw))


def test_two_results_of_one_system_are_two_rows_of_one_study(tmp_path):
    """Scored per systems file, as the summarizer scores them, never one row of 10 runs: one system in
    two rounds' trees, and an 8-node system whose -POWER folder repeats its runs. Same hardware: one
    study (one group), the rows told apart by `result`."""
    for round_, minutes in (("v4.1", 30.0), ("v5.0", 20.0)):
        org = tmp_path / f"training_results_{round_}" / "AMD"
        system_json(org / "systems" / "MI300X.json", "MI300X", 1, 8, submitter="AMD")
        submission_runs(org, "MI300X", [minutes + i for i in range(5)])
    nv = tmp_path / "training_results_v5.0" / "NVIDIA"
    for system in ("GB200_n8", "GB200_n8-POWER"):
        system_json(nv / "systems" / f"{system}.json", "GB200", 8, 4, submitter="NVIDIA")
        submission_runs(nv, system)
    runs, notes = mllog.load(tmp_path)
    rows = build_tables(runs).time_to_train
    assert sorted((r.system, r.layout, r.result, r.runs, r.ttt_min) for r in rows) == [
        ("AMD / MI300X", "1x8", "training_results_v4.1/AMD/systems/MI300X", 5, 32.0),
        ("AMD / MI300X", "1x8", "training_results_v5.0/AMD/systems/MI300X", 5, 22.0),
        ("NVIDIA / GB200", "8x4", "GB200_n8", 5, 32.0), ("NVIDIA / GB200", "8x4", "GB200_n8-POWER", 5, 32.0)]
    results = tmp_path / "training_results_v5.0" / "NVIDIA" / "results"
    assert (f"warning: {results / 'GB200_n8-POWER' / 'resnet'}: 5 run(s) the same as in {results / 'GB200_n8' / 'resnet'} "
            "(run_start and time to train to the millisecond): each folder's score counts them, as the summarizer "
            "does; not two measurements") in notes
    md = markdown(build_tables(runs))  # the summary says which row is which
    assert "| 1x8 [training_results_v4.1/AMD/systems/MI300X] |" in md and "| 8x4 [GB200_n8-POWER] |" in md
    # --group-by platform pools the systems into one group, as asked; each result keeps its row
    pooled = build_tables(mllog.load(tmp_path, group_by="platform")[0]).time_to_train
    assert len({r.system for r in pooled}) == 1 and [r.runs for r in pooled] == [5, 5, 5, 5]


def test_a_result_file_repeating_another_of_its_folder_is_one_run(tmp_path):
    """A submission folder holding one run twice (tinycorp's v4.1 BERT result_8.txt is its result_3.txt
    but for the seed's value; SMC's v4.0 DLRM folders hold each run as result_..._06.txt and as
    result_..._raw_06.txt): scored once, the first by name kept, a warning naming the folder and a pair."""
    folder = tmp_path / "Org" / "results" / "sys" / "resnet"
    submission_runs(tmp_path / "Org", "sys", (30.0, 31.0, 32.0, 33.0, 34.0))
    write(folder / "result_3_raw.txt", ["srun: job 4952 started", *(folder / "result_3.txt").read_text().splitlines()])
    write(folder / "result_5.txt", mlperf_lines(minutes=33.0, shift_ms=1))  # same time to train, another run
    runs, notes = mllog.load(tmp_path)
    assert sorted(r.run_id.split("/")[-1] for r in runs) == [f"result_{i}.txt" for i in range(6)]
    assert (f"warning: {folder}: 1 result file(s) repeat a run of another in the folder (run_start and time to train "
            "to the millisecond; result_3_raw.txt is result_3.txt): each run counted once, as the first by name") in notes
    [row] = build_tables(runs).time_to_train
    assert row.runs == 6


SYSTEMS_JSON = Path(__file__).parent / "systems_json"  # real systems JSON files (README.md there)


def test_a_study_is_one_hardware_a_result_one_systems_file(tmp_path):
    """Real systems JSONs of MLPerf Training v5.1: a size spelled as a GPU count (theia_ngpu8, _ngpu72),
    as node words (MI300X-...-1node, -2node) or not at all in the name (Krai's n1_v5.0 and n1_v5.1, one
    size in two rounds) is one study; another accelerator is another study, even under one name."""
    tree = tmp_path / "training_results_v5.1"
    for path in SYSTEMS_JSON.glob("*/systems/*.json"):
        org = tree / path.parent.parent.name
        (org / "systems").mkdir(parents=True, exist_ok=True)
        (org / "systems" / path.name).write_text(path.read_text())
        submission_runs(org, path.stem, [10.0 + i for i in range(5)] if "ngpu72" in path.stem or "2node" in path.stem
                        else [40.0 + i for i in range(5)])
    # Theia's name over other hardware (a captured file with another accelerator): apart.
    other = json.loads((SYSTEMS_JSON / "NVIDIA" / "systems" / "theia_ngpu8_ngc25.09_nemo.json").read_text())
    other["accelerator_model_name"] = "NVIDIA H100-SXM5-80GB"
    (tree / "NVIDIA" / "systems" / "theia_h100_ngpu8.json").write_text(json.dumps(other))
    submission_runs(tree / "NVIDIA", "theia_h100_ngpu8")
    rows = build_tables(mllog.load(tree)[0]).time_to_train
    got = sorted((r.system, r.layout, r.result, r.runs, r.speedup and round(r.speedup, 3))
                 for r in rows)
    theia = "NVIDIA / Theia (NVIDIA GB300 NVL72)"
    assert got == sorted([
        ("Krai / Dell PowerEdge XE9680 (MI300X-192GB)", "1x8", "PowerEdge-XE9680-MI300X-192GB_n1_v5.0", 5, 1.0),
        ("Krai / Dell PowerEdge XE9680 (MI300X-192GB)", "1x8", "PowerEdge-XE9680-MI300X-192GB_n1_v5.1", 5, 1.0),
        ("MangoBoost / MangoBoost MI300X (MI300X-192GB-HBM3, LLMBoost SW and GPUBoost HW)", "1x8",
         "MI300X-LLMBoost-GPUBoost-1node", 5, 1.0),
        ("MangoBoost / MangoBoost MI300X (MI300X-192GB-HBM3, LLMBoost SW and GPUBoost HW)", "2x8",
         "MI300X-LLMBoost-GPUBoost-2node", 5, round(42 / 12, 3)),
        ("MangoBoost / MangoBoost MI325X (MI325X-256GB-HBM3E, LLMBoost SW and GPUBoost HW)", "1x8",
         "MI325X-LLMBoost-GPUBoost-1node", 5, 1.0),
        (f"{theia} [NVIDIA H100-SXM5-80GB]", "2x4", "theia_h100_ngpu8", 5, 1.0),
        (f"{theia} [NVIDIA Blackwell Ultra GPU (GB300)]", "2x4", "theia_ngpu8_ngc25.09_nemo", 5, 1.0),
        (f"{theia} [NVIDIA Blackwell Ultra GPU (GB300)]", "18x4", "theia_ngpu72_ngc25.09_nemo", 5, round(42 / 12, 3)),
        ("NVIDIA / Tyche (NVIDIA GB200 NVL72)", "2x4", "tyche_ngpu8_ngc25.09_nemo", 5, 1.0)])


def test_size_words_in_system_names_make_one_scaling_study(tmp_path):
    """'Tyche (16x B200-SXM-180GB)' and 'Tyche (8x B200-SXM-180GB)', 'box_n2_v5.0' and 'box_n1_v5.0':
    one system's node counts, one group, a speed-up per layout (not 1.00x each)."""
    org = tmp_path / "Acme"
    for nodes in (1, 2):
        system_json(org / "systems" / f"tyche_n{nodes}.json", f"Tyche ({8 * nodes}x B200-SXM-180GB)", nodes, 8,
                    submitter="Acme")
        submission_runs(org, f"tyche_n{nodes}", [40.0 / nodes + i for i in range(5)])
        submission_runs(org, f"box_n{nodes}_v5.0", [40.0 / nodes + i for i in range(5)], layout=(nodes, 4))
    rows = build_tables(mllog.load(tmp_path)[0]).time_to_train
    assert [(r.system, r.layout, round(r.speedup, 3)) for r in rows] == [
        ("Acme / Tyche (B200-SXM-180GB)", "1x8", 1.0), ("Acme / Tyche (B200-SXM-180GB)", "2x8", round(42 / 22, 3)),
        ("Acme / box", "1x4", 1.0), ("Acme / box", "2x4", round(42 / 22, 3))]


@pytest.mark.parametrize("name, family", [
    ("Tyche (16x B200-SXM-180GB)", "Tyche (B200-SXM-180GB)"), ("mi300x_n2_v5.0", "mi300x"),
    ("Foo 16x B200", "Foo B200"), ("sys_8_nodes", "sys"), ("8 xeon box", "8 xeon box"),
])
def test_system_family_drops_counts_in_parentheses_and_round_suffixes(name, family):
    assert mllog.system_family(name) == family


def test_sample_counted_llm_rows_show_samples_not_a_sliver_of_an_epoch(tmp_path):
    """An LLM log's train_samples is its corpus: 300,000 samples of 1.5e9 are 0.0002 epochs at
    ~150,000 min each. epochs.csv and the summary show samples to target and min per 1M samples."""
    size = ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "train_samples", ' \
           '"value": 1574207408, "metadata": {"file": "x.py", "lineno": 1}}' % T0
    for i, minutes in enumerate((30.0, 31.0, 32.0)):
        lines = mlperf_lines(minutes=minutes, evals=((150_000, 6.0), (300_000, 5.6)), benchmark="llama31_405b",
                             batch=1152, org="Org")
        write(tmp_path / "Org" / "results" / "box_32x8x1x1" / "llama31_405b" / f"result_{i}.txt",
              [lines[0], size, *lines[1:]])
    tables = build_tables(mllog.read_mllog_dir(tmp_path))
    [row] = tables.epochs
    assert (row.epochs_mean, row.time_per_epoch_min) == (None, None)
    assert row.samples_to_target_mean == 300_000 and row.time_per_1m_samples_min == pytest.approx(31 / 0.3)
    assert tables.time_to_train[0].epochs_mean is None
    from hvdbench.results.render.tables import write_csvs
    write_csvs(tables, tmp_path / "report")
    [line] = list(csv.DictReader(open(tmp_path / "report" / "epochs.csv")))
    assert (line["epochs_mean"], line["samples_to_target_mean"]) == ("", "300000")
    text = markdown(tables)
    epochs_section = text.split("## Epochs and time per epoch")[1].split("\n## ")[0]
    assert "| GPUs | layout | global batch | samples to target | min per 1M samples |" in epochs_section
    assert "| 256 | 32x8 | 1152 | 300,000 | 103.33 |" in epochs_section and "epoch (" not in epochs_section


def test_a_result_file_without_any_event_is_a_warning_and_a_run_only_beside_runs(tmp_path):
    """Alone in its benchmark folder, an empty result_0.txt is no run (not a DNF row made of nothing);
    beside runs it is one that did not converge, as the official summarizer counts it. Both warned."""
    org = tmp_path / "Org"
    submission_runs(org, "DGXA100_1x8x56x1", (30.0, 31.0, 32.0))
    beside = write(org / "results" / "DGXA100_1x8x56x1" / "resnet" / "result_3.txt", ["job killed before logging"])
    alone = write(org / "results" / "DGXA100_2x8x56x1" / "resnet" / "result_0.txt", ["job killed before logging"])
    runs, notes = mllog.load(tmp_path)
    assert sorted((r.layout, r.status) for r in runs) == [("1x8", "failed")] + [("1x8", "success")] * 3
    said = "a result file with no MLPerf run event (without :::MLLOG lines)"
    assert f"warning: {alone}: {said}: not counted as a run (no result file beside it holds one)" in notes
    assert f"warning: {beside}: {said}: counted as a run that did not converge, as the summarizer counts it" in notes
    [row] = build_tables(runs).time_to_train  # no 2x8 row
    assert (row.runs, row.converged, row.ttt_min) == (4, 3, pytest.approx(31.5))  # dropped: 30, the empty
    assert notes[0] == (f"{tmp_path}: 4 run(s) from 4 log file(s); 1 file(s) skipped: 1 without :::MLLOG lines "
                        "(e.g. Org/results/DGXA100_2x8x56x1/resnet/result_0.txt)")


def test_published_throughput_that_falls_with_more_nodes_is_flagged(tmp_path):
    for nodes, throughput in ((1, 1000.0), (2, 800.0)):
        for i in range(3):
            write(tmp_path / "vendor" / f"retinanet-{nodes}node" / f"run{i}.log",
                  mlperf_lines(layout=(nodes, 8), throughput=throughput + i, org="Vendor"))
    rows = {r.layout: r for r in build_tables(mllog.load(tmp_path / "vendor")[0]).scaling}
    assert (rows["1x8"].flags, rows["2x8"].flags) == ("", "inverse-scaling")


def test_a_placeholder_org_gives_way_to_the_submitter_folder(tmp_path):
    """Without a systems JSON the log's submission_org is all there is, and it is a placeholder."""
    submission_runs(tmp_path / "Lenovo", "SR675V3_1x8x32x1", (30.0, 31.0, 32.0), org="SUBMISSION_ORG_PLACEHOLDER")
    runs, _ = mllog.load(tmp_path)
    assert {(r.submitter, r.devices) for r in runs} == {("Lenovo", "Lenovo / SR675V3")}


@pytest.mark.parametrize("value", [0, -1, 1000, 2.5, "four"])
def test_an_accumulation_that_is_no_count_is_warned_with_its_line_and_left_out(tmp_path, value):
    """Issue 57 case 9: gradient_accumulation_steps 0 or -1 was taken as 1 unsaid, and 1000 (past a global
    batch of 8) passed; it tells accumulation from model parallelism, so a wrong one moves predictions."""
    from hvdbench.results.mllog.load import load

    lines = mlperf_lines(batch=8)
    at = next(i for i, text in enumerate(lines) if C.GLOBAL_BATCH_SIZE in text) + 1
    lines.insert(at, lines[at - 1].replace(f'"{C.GLOBAL_BATCH_SIZE}", "value": 8',
                                           f'"{C.GRADIENT_ACCUMULATION_STEPS}", "value": {json.dumps(value)}'))
    assert C.GRADIENT_ACCUMULATION_STEPS in lines[at]
    path = write(tmp_path / "Org" / "results" / "sys" / "resnet" / "result_0.txt", lines)
    runs, notes = load(tmp_path)
    assert [r.accumulation for r in runs] == [1]
    assert f"warning: {path}:{at + 1}: {C.GRADIENT_ACCUMULATION_STEPS} {value!r} is no count of micro-batches (a whole " \
           f"number, at least 1, at most the global batch 8): left out" in notes


def test_an_accumulation_that_is_a_count_is_read(tmp_path):
    from hvdbench.results.mllog.load import load

    lines = mlperf_lines(batch=8)
    at = next(i for i, text in enumerate(lines) if C.GLOBAL_BATCH_SIZE in text) + 1
    lines.insert(at, lines[at - 1].replace(f'"{C.GLOBAL_BATCH_SIZE}", "value": 8',
                                           f'"{C.GRADIENT_ACCUMULATION_STEPS}", "value": 4'))
    write(tmp_path / "Org" / "results" / "sys" / "resnet" / "result_0.txt", lines)
    runs, notes = load(tmp_path)
    assert [r.accumulation for r in runs] == [4] and not any("micro-batches" in n for n in notes)
