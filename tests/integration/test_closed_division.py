"""MLPerf's closed division: the official compliance checker (`mlperf_logging.compliance_checker
--usage training --ruleset 4.0.0`, which reads the division from the log) on the event logs of
two-rank debug runs logged as closed (`--set submission.division=closed`). The model specs name
their reference's optimizer and schedule keys (ResNet-50's SGD: sgd_opt_base_learning_rate,
sgd_opt_end_learning_rate, sgd_opt_learning_rate_decay_poly_power, sgd_opt_learning_rate_decay_steps,
sgd_opt_weight_decay, sgd_opt_momentum, model_bn_span; BERT's LAMB: opt_lamb_beta_1/_beta_2/_epsilon/
_weight_decay_rate, num_warmup_steps, start_warmup_step), so the only failures left are those a
debug model on built-in data cannot avoid:

- ResNet-50 (debug flavor on the built-in digits, 16x16, under --engine ddp): none. Ruleset 4.0.0
  checks the keys and their values (the base learning rate a multiple of 0.001, the end learning
  rate 1e-4, the weight decay 1e-4 x a power of two) and that one evaluation reaches 0.759 and
  stays below 1.0, which the digits' 0.95 target does; it checks neither the dataset's size nor the
  network.
- BERT (debug flavor on the built-in pydoc corpus, 4,000-token vocabulary): one, the quality
  target, "Failed checks for eval_accuracy : (v['value'] >= 0.720) and v['value'] < 1.0": a
  2-layer, 64-wide BERT on CPython's documentation stops at its own target, 0.12.

A negative control per model shows the checker does read the keys: without them it names them.

    .venv/bin/python -m pytest tests/integration/test_closed_division.py
"""

import re
import subprocess
import sys

import pytest
from conftest import run

from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration

# The failures ruleset 4.0.0's closed division leaves on each debug run (see the docstring).
UNAVOIDABLE = {
    "resnet50": set(),
    "bert": {"Failed checks for eval_accuracy : (v['value'] >= 0.720) and v['value'] < 1.0"},
}


def checker_failures(mllog, cwd) -> set[str]:
    """The compliance checker's failed checks (warnings count as failures: --werror), one string
    each; empty when it reports SUCCESS."""
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", "4.0.0", "--werror", "--log_output", str(cwd / "cc.log"), str(mllog)],
                          capture_output=True, text=True, cwd=cwd)
    text = proc.stdout + proc.stderr
    assert "closed_common.yaml" in text, text  # the closed division's rules were loaded
    found = re.search(r"WARNING - (.*?)\n(?:ERROR|INFO) - ", text, re.S)
    failures = {part.strip() for part in re.split(r"\n-{10,}\n", found.group(1)) if part.strip()} if found else set()
    assert (proc.returncode == 0) == (not failures) and ("SUCCESS" in text) == (not failures), text
    return failures


def without_keys(mllog, keys, out):
    lines = [line for line in mllog.read_text().splitlines() if not any(f'"key": "{k}"' in line for k in keys)]
    out.write_text("\n".join(lines) + "\n")
    return out


def values(events) -> dict:
    return {e["key"]: e["value"] for e in events if e["event_type"] == "POINT_IN_TIME"}


@pytest.fixture(scope="module")
def data(digits16, pydoc):
    """The run's shared datasets (tests/conftest.py): the digits at 16x16, BERT's pydoc."""
    return {"resnet50": digits16, "bert": pydoc["bert"]}


def closed_run(model, data, out, horovodrun, hvdbench_bin, *extra):
    run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", model, "--flavor", "debug",
         "--data", data[model], "--set", "submission.division=closed", *extra, "--out", out])
    record, config = read_result(out / "result.json")
    assert record.status == "success" and config["submission"]["division"] == "closed"
    return record, config, values(read_events(out / "mllog.txt"))


@pytest.mark.timeout(240)
def test_resnet50_closed_division(data, tmp_path, horovodrun, hvdbench_bin):
    """Under --engine ddp: this launch is also ResNet-50's time to accuracy under DDP (the engines'
    own test trains to the target under fsdp), one launch where two were."""
    out = tmp_path / "run"
    record, config, logged = closed_run("resnet50", data, out, horovodrun, hvdbench_bin, "--engine", "ddp")
    assert (record.mode, record.engine, config["engine"]) == ("time_to_accuracy", "ddp", "ddp")
    assert record.final_metric >= record.target == 0.95
    events = (out / "mllog.txt").read_text()
    assert '"key": "run_stop"' in events and '"status": "success"' in events
    assert logged["submission_division"] == "closed" and logged["opt_name"] == "sgd"
    assert logged["sgd_opt_base_learning_rate"] == logged["opt_base_learning_rate"]
    assert logged["sgd_opt_learning_rate_decay_steps"] == (logged["opt_learning_rate_training_steps"]
                                                           - logged["opt_learning_rate_warmup_steps"])
    assert (logged["sgd_opt_end_learning_rate"], logged["sgd_opt_momentum"]) == (config["end_lr"], config["momentum"])
    assert logged["model_bn_span"] == config["batch_per_gpu"]
    assert checker_failures(out / "mllog.txt", tmp_path) == UNAVOIDABLE["resnet50"]

    control = without_keys(out / "mllog.txt", ["sgd_opt_momentum", "model_bn_span"], tmp_path / "control.txt")
    assert checker_failures(control, tmp_path) == {
        "Required EXACTLY_ONE occurrence of 'sgd_opt_momentum' but found 0",
        "Required EXACTLY_ONE occurrence of 'model_bn_span' but found 0"}


@pytest.mark.timeout(240)
def test_bert_closed_division(data, tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    record, config, logged = closed_run("bert", data, out, horovodrun, hvdbench_bin,
                                        "--eval-every", "1600", "--max-epochs", "1.5")
    assert logged["opt_name"] == "lamb" and record.final_metric < 0.720
    assert (logged["opt_lamb_beta_1"], logged["opt_lamb_beta_2"], logged["opt_lamb_epsilon"]) == (0.9, 0.999, 1e-6)
    assert logged["opt_lamb_weight_decay_rate"] == config["weight_decay"]
    assert logged["num_warmup_steps"] == logged["opt_learning_rate_warmup_steps"] > 0
    assert logged["start_warmup_step"] == 0
    assert checker_failures(out / "mllog.txt", tmp_path) == UNAVOIDABLE["bert"]

    control = without_keys(out / "mllog.txt", ["opt_lamb_beta_1"], tmp_path / "control.txt")
    assert checker_failures(control, tmp_path) == {
        "Required EXACTLY_ONE occurrence of 'opt_lamb_beta_1' but found 0", *UNAVOIDABLE["bert"]}
