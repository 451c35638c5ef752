"""`hvdbench train llama2_lora` under real two-rank Horovod launches: the debug flavor, LoRA on a
base pre-trained by `prepare lm-base`, reaches its eval-loss target on the stdlib docstring
summaries; Horovod averages the adapters' gradients and nothing else (read from its own timeline);
both ranks end with the same weights; the event log carries the closed division's LoRA keys; the
70b flavor refuses to start, saying why. The run is logged as MLPerf's closed division, and the
official compliance checker (ruleset 5.0.0: 4.x's common rules do not list llama2_70b_lora yet)
finds every key the closed division requires of the benchmark; the one failure left is the
quality target, 0.925, which a 1.3M-parameter model on docstrings does not reach.

    .venv/bin/python -m pytest tests/integration/test_train_llama2_lora.py
"""

import json
import math
import re
import subprocess
import sys

import pytest
from conftest import run

from hvdbench.contracts import get_spec
from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration

SPEC = get_spec("llama2_lora")


@pytest.fixture(scope="module")
def summaries(tmp_path_factory, hvdbench_bin, lm_base):
    """The README's two preparation steps with their defaults: the base's pre-training is ~80
    CPU-seconds (one thread; tests/conftest.py's lm_base, once per run), the pairs a few seconds."""
    root = tmp_path_factory.mktemp("llama")
    run([hvdbench_bin, "prepare", "summaries", "--src", "builtin:stdlib-docstrings", "--base", lm_base,
         "--out", root / "summaries"])
    return root / "summaries"


def base_only_eval_loss(data) -> float:
    """The eval loss of the pre-trained base before any fine-tuning (fresh adapters are zero)."""
    import torch

    from hvdbench.data.readers import open_dataset
    from hvdbench.models.llama2_lora import torch as llama

    ds = open_dataset(data)
    model = llama.build(SPEC.flavor("debug"), **ds.data_info)
    assert llama.load_base(model, data)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in ds.loader("val", 64, shuffle=False, drop_last=False):
            _, stats = llama.loss_and_stats(model, {k: torch.from_numpy(v) for k, v in batch.items()})
            total, count = total + float(stats["loss_sum"]), count + stats["count"]
    return total / count


def checker_failures(mllog, cwd) -> set[str]:
    """The failed checks (warnings included) of mlperf-logging's compliance checker, one string each."""
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", "5.0.0", "--werror", "--log_output", str(cwd / "cc.log"), str(mllog)],
                          capture_output=True, text=True, cwd=cwd, check=False)
    text = proc.stdout + proc.stderr
    assert "closed_llama2_70b_lora.yaml" in text, text  # the benchmark's closed rules were loaded
    found = re.search(r"WARNING - (.*?)\n(?:ERROR|INFO) - ", text, re.DOTALL)
    failures = {part.strip() for part in re.split(r"\n(?:-{10,}\n)?", found.group(1)) if part.strip()} if found \
        else set()
    assert (proc.returncode == 0) == (not failures), text
    return failures


def allreduced(timeline) -> dict[str, int]:
    """Horovod's timeline: the name and element count of every tensor the job allreduced."""
    text = timeline.read_text()
    names = dict(re.findall(r'"name": "process_name", "ph": "M", "pid": (\d+), "args": \{"name": "([^"]+)"\}', text))
    sizes = {}
    for pid, shape in re.findall(r'"pid": (\d+), "args": \{"dtype": "\w+", "shape": "\[([\d, ]*)\]"\}', text):
        sizes[names[pid]] = math.prod(int(d) for d in shape.split(",") if d.strip())
    return {name: size for name, size in sizes.items() if name.startswith("allreduce.")}


@pytest.mark.timeout(420, func_only=True)  # the launch; lm-base's preparation is bounded by its own 900 s
def test_debug_lora_reaches_its_target_averaging_only_the_adapters(summaries, tmp_path, horovodrun, hvdbench_bin):
    out, timeline = tmp_path / "run", tmp_path / "timeline.json"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--timeline-filename", timeline, hvdbench_bin, "train",
                "llama2_lora", "--flavor", "debug", "--data", summaries, "--set", "submission.division=closed",
                "--out", out], timeout=420)
    record, config = read_result(out / "result.json")
    target = SPEC.target("debug")
    assert (record.status, record.mode, record.metric_name) == ("success", "time_to_accuracy", "eval_loss")
    assert (record.world_size, record.layout, record.target) == (2, "1x2", target)
    assert record.parameters == SPEC.parameters["debug"] and config["optimizer"] == "adamw"
    # Lower is better: the run stopped at the first evaluation at or below the target, which the
    # pre-trained base alone does not reach (the adapters did the rest).
    checks = json.loads((out / "checks.json").read_text())
    evals = [e["metric"] for e in checks["evals"]]
    assert [v <= target for v in evals] == [False] * (len(evals) - 1) + [True]
    before = base_only_eval_loss(summaries)
    assert before > target + 0.2 and evals[0] < before
    val_tokens = json.loads((summaries / "manifest.json").read_text())["summary_tokens"]["val"]
    assert all(e["samples"] == val_tokens for e in checks["evals"])  # every summary token, once
    print(f"llama2_lora debug: eval loss {before:.3f} (base) -> {record.final_metric:.3f} after "
          f"{record.epochs:.2f} epochs, time-to-train {record.time_to_train_s:.1f} s")

    # Both ranks hold the same weights (adapters included) at the end.
    assert checks["params_identical"] is True and len(set(checks["param_digests"])) == 1
    assert proc.stdout.count("parameters identical on all 2 ranks: True") == 1

    # What Horovod averaged: the 16 adapter tensors (49,152 numbers) of the DistributedOptimizer,
    # and the loop's own scalars; no base weight.
    sums = allreduced(timeline)
    gradients = {name: size for name, size in sums.items() if not name.startswith("allreduce.hvdbench.")}
    assert len(gradients) == 16 and sum(gradients.values()) == 49_152, sorted(gradients)
    assert all(re.search(r"\.(qkv_proj|o_proj)\.lora_[AB]\.default\.weight$", n) for n in gradients)

    events = read_events(out / "mllog.txt")
    value = {e["key"]: e["value"] for e in events}
    assert value["submission_benchmark"] == "llama2_70b_lora"
    assert (value["lora_rank"], value["lora_alpha"], value["opt_gradient_clip_norm"]) == (16, 32, 0.3)
    assert value["opt_adamw_weight_decay"] == config["weight_decay"]
    accuracy = [e for e in events if e["key"] == "eval_accuracy"]
    assert accuracy[-1]["value"] == pytest.approx(record.final_metric)
    assert all("samples_count" in e["metadata"] for e in accuracy)  # MLPerf counts LoRA evals in samples
    assert checker_failures(out / "mllog.txt", tmp_path) == {
        "Failed checks for eval_accuracy : (v['value'] <= 0.925) and v['value'] > 0.0"}


@pytest.mark.timeout(180)
def test_70b_refuses_a_whole_replica_per_rank_with_the_reason(tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", hvdbench_bin, "train", "llama2_lora", "--flavor", "70b",
                "--synthetic", "--out", out], check=False, timeout=180)
    assert proc.returncode != 0
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot run under --engine horovod" in ln]
    assert said, proc.stderr[-2000:]
    assert len(said) == 1, said  # refused with the config, before Horovod starts: rank 0 says it once
    assert "138 GB" in said[0] and "--engine fsdp" in said[0] and "8 x 80 GB" in said[0]
    assert "--flavor 7b or 13b" in said[0]
    assert not (out / "result.json").exists()  # like any config error, before the run: nothing written
    assert "Traceback" not in proc.stderr
