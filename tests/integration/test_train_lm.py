"""The C4 language models under real two-rank launches, on one `hvdbench prepare c4 --src
builtin:pydoc` dataset (CPython's documentation in C4's place), one time-to-accuracy launch per
model: sharded (--engine fsdp; llama31_8b under torchrun, gpt_oss_20b under mpirun) and logged as
MLPerf's closed division, the debug flavors reach their log-perplexity targets, both ranks end with
the same weights, gpt_oss_20b reports its router's load at every evaluation, and each run passes
mlperf-logging's compliance checker (ruleset 6.0.0) but for what the debug data cannot give: the
quality target (3.3 / 3.34), the reference's 8,192-token sequences (256 here) and its 1,024
validation sequences (the built-in text holds out 46). A negative control shows the checker reads
the keys the model folders log. (These were two launches a model, a closed-division horovodrun run
and an fsdp run; one checks what both did.) Horovod's engine is kept by two synthetic steps a model
under horovodrun.

    .venv/bin/python -m pytest tests/integration/test_train_lm.py
"""

import json
import re
import subprocess
import sys

import pytest
from conftest import run

from hvdbench.contracts import get_spec
from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration

RULESET = "6.0.0"


@pytest.fixture(scope="module")
def c4_debug(tmp_path_factory, hvdbench_bin):
    """The README's debug data, once for both models (about a second)."""
    out = tmp_path_factory.mktemp("lm") / "c4-debug"
    run([hvdbench_bin, "prepare", "c4", "--src", "builtin:pydoc", "--out", out])
    return out


def checker_failures(mllog, cwd, benchmark) -> set[str]:
    """mlperf-logging's failed checks (warnings included), one string each: the check's first line
    and its failed test."""
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", RULESET, "--werror", "--log_output", str(cwd / "cc.log"), str(mllog)],
                          capture_output=True, text=True, cwd=cwd, check=False)
    text = proc.stdout + proc.stderr
    assert f"closed_{benchmark}.yaml" in text, text  # the benchmark's closed rules were loaded
    found = re.search(r"WARNING - (.*?)\n(?:ERROR|INFO) - ", text, re.DOTALL)
    failures = set()
    for part in re.split(r"\n-{10,}\n", found.group(1)) if found else []:
        for head in [ln.strip() for ln in part.strip().splitlines() if re.match(r"\s*(CHECK for|Failed|Required)", ln)]:
            test = re.search(r"failed test: (.*)", part)
            failures.add(re.sub(r" in line \d+:$", "", head) + (f": {test.group(1).strip()}" if head.startswith("CHECK")
                                                                 and test else ""))
    assert (proc.returncode == 0) == (not failures), text
    return failures


def unavoidable(target) -> set[str]:
    """What a debug run on the built-in text cannot give the closed division."""
    return {"CHECK for 'eval_samples' failed: v['value'] == 1024",
            "CHECK for 'max_sequence_length' failed: v['value'] == 8192",
            f"Failed checks for eval_accuracy : (v['value'] <= {target}) and v['value'] > 0.0"}


LAUNCHERS = {"llama31_8b": "torchrun", "gpt_oss_20b": "mpirun"}  # both of FSDP's launchers, one model each


@pytest.mark.timeout(420)
@pytest.mark.parametrize("model", list(LAUNCHERS))
def test_debug_flavor_reaches_its_target_sharded_and_logs_the_closed_divisions_keys(model, c4_debug, tmp_path,
                                                                                    mpirun, hvdbench_bin):
    """One launch per model proves what two did (a closed-division Horovod run and an --engine fsdp
    run, merged): sharded (--engine fsdp: every decoder layer, then the root; llama31_8b started by
    torchrun, gpt_oss_20b by mpirun) and logged as the closed division, the debug flavor reaches its
    target with every validation token evaluated once at each evaluation, each rank holds about half
    the parameters and both end with the same weights, gpt_oss_20b says its router's load at every
    evaluation, the MLPerf log holds the model folder's values and passes the compliance checker but
    for the unavoidable, and the negative control shows the checker reads the keys. That the models
    train under Horovod's engine is `test_debug_flavor_trains_under_horovod` below."""
    from conftest import BIN

    spec, out, launcher = get_spec(model), tmp_path / "run", LAUNCHERS[model]
    start = ([str(BIN / "torchrun"), "--standalone", "--nnodes", "1", "--nproc-per-node", "2", "--no-python"]
             if launcher == "torchrun" else [mpirun, "-np", "2", "--bind-to", "none"])
    proc = run([*start, hvdbench_bin, "train", model, "--flavor", "debug", "--engine", "fsdp", "--data", c4_debug,
                "--set", "submission.division=closed", "--out", out], timeout=400)
    record, config = read_result(out / "result.json")
    target = spec.target("debug")
    assert (record.status, record.mode, record.metric_name) == ("success", "time_to_accuracy", "log_perplexity")
    assert (record.engine, record.launcher) == ("fsdp", launcher)
    assert (record.world_size, record.layout, record.target) == (2, "1x2", target)
    assert record.final_metric <= record.target
    assert record.parameters == spec.parameters["debug"] and config["optimizer"] == "adamw"
    assert record.parameters / 2 <= record.shard_parameters < record.parameters * 0.6
    checks = json.loads((out / "checks.json").read_text())
    evals = [e["metric"] for e in checks["evals"]]
    assert [v <= target for v in evals] == [False] * (len(evals) - 1) + [True]  # lower is better
    val = json.loads((c4_debug / "manifest.json").read_text())["splits"]["val"]["samples"]
    assert all(e["samples"] == val * 256 for e in checks["evals"])  # every validation token, once
    print(f"{model} debug (fsdp, {launcher}): log-perplexity {evals[0]:.3f} -> {record.final_metric:.3f} after "
          f"{record.epochs:.2f} epochs, time-to-train {record.time_to_train_s:.1f} s")

    # Both ranks hold the same weights at the end.
    assert checks["params_identical"] is True and len(set(checks["param_digests"])) == 1
    assert proc.stdout.count("parameters identical on all 2 ranks: True") == 1

    if model == "gpt_oss_20b":  # the router's load, said by rank 0 at every evaluation
        loads = re.findall(r"router load over the evaluation: ([\d,]+) token slots to 8 experts \(top-2\)", proc.stdout)
        slots = val * 256 * 2 * spec.flavor("debug").layers  # every validation token, top 2, every layer
        assert len(loads) == len(evals) and {int(n.replace(",", "")) for n in loads} == {slots}

    events = read_events(out / "mllog.txt")
    value = {e["key"]: e["value"] for e in events if e["event_type"] == "POINT_IN_TIME"}
    assert (value["submission_benchmark"], value["submission_division"]) == (model, "closed")
    assert (value["opt_adamw_beta_1"], value["opt_adamw_beta_2"], value["opt_adamw_epsilon"]) == (0.9, 0.95, 1e-5)
    assert value["opt_learning_rate_decay_steps"] == 1_200_000 - value["opt_learning_rate_warmup_steps"]
    assert value["opt_end_learning_rate"] == pytest.approx(0.1 * value["opt_base_learning_rate"])
    assert (value["max_steps"], value["max_sequence_length"], value["eval_samples"]) == (1_200_000, 256, val)
    accuracy = [e for e in events if e["key"] == "eval_accuracy"]
    assert accuracy[-1]["value"] == pytest.approx(record.final_metric)
    assert all("samples_count" in e["metadata"] for e in accuracy)
    assert checker_failures(out / "mllog.txt", tmp_path, model) == unavoidable(spec.mlperf_target)

    # The negative control: without a key the model folder logs, the checker names it.
    control = tmp_path / "control.txt"
    control.write_text("".join(ln + "\n" for ln in (out / "mllog.txt").read_text().splitlines()
                               if '"key": "opt_adamw_beta_2"' not in ln))
    assert checker_failures(control, tmp_path, model) == {
        "Required EXACTLY_ONE occurrence of 'opt_adamw_beta_2' but found 0", *unavoidable(spec.mlperf_target)}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("model", list(LAUNCHERS))
def test_debug_flavor_trains_under_horovod(model, tmp_path, horovodrun, hvdbench_bin):
    """Horovod's engine on these models, at the least cost (what is left of the closed-division
    horovodrun runs, whose other checks the fsdp runs above make): two synthetic steps on two ranks
    under horovodrun train, and Horovod's allreduce leaves both ranks with the same weights."""
    out = tmp_path / "run"
    run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", model, "--flavor", "debug",
         "--synthetic", "--steps", "2", "--warmup-steps", "1", "--warmup-max-steps", "1", "--out", out], timeout=170)
    record, _ = read_result(out / "result.json")
    assert (record.status, record.mode, record.engine) == ("success", "throughput", "horovod")
    assert (record.world_size, record.launcher, record.steps) == (2, "horovodrun", 2)
    assert record.parameters == get_spec(model).parameters["debug"]
    assert json.loads((out / "checks.json").read_text())["params_identical"] is True
