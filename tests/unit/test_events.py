"""The MLPerf event log: rank 0 writes official :::MLLOG lines (through mlperf_logging), other ranks
write nothing, and a log shaped like a worker's passes MLCommons' compliance checker."""

import subprocess
import sys

import pytest
from mlperf_logging.mllog import constants as C

from hvdbench.events import EventLog
from hvdbench.results.mllog import read_event_dicts


def test_lines_are_mllog_json_with_the_callers_location(tmp_path):
    log = EventLog(tmp_path / "mllog.txt")
    log.event(C.GLOBAL_BATCH_SIZE, 64)
    log.start(C.RUN_START)
    log.end(C.RUN_STOP, metadata={"status": "success"})
    log.close()
    lines = (tmp_path / "mllog.txt").read_text().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    events = read_event_dicts(tmp_path / "mllog.txt")
    assert [(e["key"], e["event_type"]) for e in events] == [
        ("global_batch_size", "POINT_IN_TIME"), ("run_start", "INTERVAL_START"), ("run_stop", "INTERVAL_END")]
    assert events[0]["value"] == 64 and events[2]["metadata"]["status"] == "success"
    assert events[0]["metadata"]["file"] == __file__  # the call site, not events.py


def test_an_unreadable_line_in_a_runs_own_log_is_an_error(tmp_path):
    from hvdbench.results.records.schema import SchemaError

    log = EventLog(tmp_path / "mllog.txt")
    log.event(C.SEED, 1)
    log.close()
    with open(tmp_path / "mllog.txt", "a") as f:
        f.write(':::MLLOG {"namespace": "", "time_ms": 1\n')
    with pytest.raises(SchemaError, match="1 unreadable"):
        read_event_dicts(tmp_path / "mllog.txt")


def test_a_disabled_log_writes_nothing_and_does_not_print(tmp_path, capsys):
    log = EventLog(None)
    log.event(C.GLOBAL_BATCH_SIZE, 64)
    log.submission("resnet", "org", "1x2 cpu", "open", "research")
    assert not log.enabled and list(tmp_path.iterdir()) == []
    assert capsys.readouterr() == ("", "")


def test_enabled_log_does_not_print_to_stdout(tmp_path, capsys):
    log = EventLog(tmp_path / "mllog.txt")
    log.event(C.SEED, 1)
    log.close()
    assert capsys.readouterr().out == ""


def test_two_logs_in_one_process_do_not_mix(tmp_path):
    a, b = EventLog(tmp_path / "a.txt"), EventLog(tmp_path / "b.txt")
    a.event(C.SEED, 1)
    b.event(C.SEED, 2)
    a.close()
    b.close()
    assert [e["value"] for e in read_event_dicts(tmp_path / "a.txt")] == [1]
    assert [e["value"] for e in read_event_dicts(tmp_path / "b.txt")] == [2]


def write_run(log: EventLog, epochs=3, accuracies=(0.5, 0.8, 0.96)):
    """The events hvdbench's worker writes for a ResNet time-to-accuracy run, in its order."""
    log.start(C.INIT_START)
    log.submission("resnet", "hvdbench", "1x2 cpu", "open", "research")  # MLPerf's name for resnet50
    log.event(C.CACHE_CLEAR, False)
    log.hyperparameters({C.SEED: 0, C.GLOBAL_BATCH_SIZE: 32, C.GRADIENT_ACCUMULATION_STEPS: 1,
                         C.OPT_NAME: "sgd", C.OPT_BASE_LR: 0.1})
    log.event(C.TRAIN_SAMPLES, 1437)
    log.event(C.EVAL_SAMPLES, 360)
    log.end(C.INIT_STOP)
    log.start(C.RUN_START)
    for epoch, acc in zip(range(1, epochs + 1), accuracies):
        log.start(C.BLOCK_START, metadata={"first_epoch_num": epoch, "epoch_count": 1})
        log.start(C.EPOCH_START, metadata={"epoch_num": epoch})
        log.end(C.EPOCH_STOP, metadata={"epoch_num": epoch})
        log.end(C.BLOCK_STOP, metadata={"first_epoch_num": epoch})
        log.start(C.EVAL_START, metadata={"epoch_num": epoch})
        log.end(C.EVAL_STOP, metadata={"epoch_num": epoch})
        log.event(C.EVAL_ACCURACY, acc, metadata={"epoch_num": epoch})
    log.end(C.RUN_STOP, metadata={"status": "success"})
    log.close()


def check(path, cwd):
    # Ruleset 4.0.0: the last training ruleset that still has ResNet-50 (and it has BERT); open
    # division, since hvdbench's runs are not closed-division submissions.
    return subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", "4.0.0", "--werror", "--log_output", str(cwd / "cc.log"), str(path)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_worker_event_sequence_passes_the_compliance_checker(tmp_path):
    write_run(EventLog(tmp_path / "mllog.txt"))
    proc = check(tmp_path / "mllog.txt", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_checker_does_catch_a_broken_log(tmp_path):
    """The check above can fail: a log with run_stop missing its status is refused."""
    log = EventLog(tmp_path / "mllog.txt")
    write_run(log)
    text = (tmp_path / "mllog.txt").read_text().replace('"status": "success"', '"state": "success"')
    (tmp_path / "mllog.txt").write_text(text)
    proc = check(tmp_path / "mllog.txt", tmp_path)
    assert proc.returncode != 0 and "status" in proc.stdout + proc.stderr
