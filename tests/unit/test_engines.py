"""--engine horovod|ddp|fsdp without a launch: the option wherever a TrainConfig goes, each launcher's
environment read into rank, size, local rank and rendezvous (exact values), the torchrun launcher's
argv, `sweep --engines`, the per-engine memory estimate and the GPU refusals, and the report's
engine table. The launches themselves are tests/integration/test_train_engines.py."""

import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.frameworks import horovod_installed
from hvdbench.frameworks.torch.engines import remap_groups
from hvdbench.launchers import Job, torchrun
from hvdbench.launchers.launch_info import Place, detect_launcher, place
from hvdbench.launchers.srun import first_host
from hvdbench.results.analyses import engines
from hvdbench.results.records.schema import LoadedRun
from hvdbench.results.stats.aggregate import build_tables
from hvdbench.topology import Layout
from hvdbench.train import memory
from hvdbench.train.config import resolve
from hvdbench.train.options import resolve_train_args

# --- the option --------------------------------------------------------------------------------


def test_the_engine_reaches_train_yaml_set_and_layout_settings(tmp_path):
    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path / "o")}
    # The default follows the environment: horovod where Horovod is installed (make setup's venv),
    # ddp in a Python without it (CI's torch tiers run this file there).
    assert resolve(base).engine == ("horovod" if horovod_installed() else "ddp")
    assert resolve_train_args("resnet50", ["--synthetic", "--engine", "fsdp"], out="o").engine == "fsdp"
    assert resolve_train_args("resnet50", ["--synthetic", "--set", "engine=ddp"], out="o").engine == "ddp"
    (tmp_path / "run.yaml").write_text("engine: ddp\nfsdp_offload: false\n")
    assert resolve(base, tmp_path / "run.yaml").engine == "ddp"
    assert resolve(base, layout={"engine": "fsdp", "fsdp_offload": True}).fsdp_offload


@pytest.mark.parametrize("given, said", [
    ({"engine": "zero3"}, "engine 'zero3' is not one of horovod, ddp, fsdp"),
    ({"engine": "ddp", "framework": "tensorflow"}, "--engine ddp is PyTorch's; tensorflow models train under "
                                                   "--engine horovod"),
    ({"fsdp_offload": True}, "fsdp_offload needs --engine fsdp"),
    ({"engine": "fsdp", "steps": 5, "horovod_timeline": True}, "--engine fsdp has none"),
])
def test_engine_settings_that_cannot_run_are_one_line(tmp_path, given, said):
    with pytest.raises(ConfigError) as e:
        resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path), **given})
    assert said in str(e.value) and "\n" not in str(e.value)


# --- where each launcher puts this process --------------------------------------------------------


@pytest.mark.parametrize("env, want, launcher", [
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
      "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}, Place(5, 8, 1, 4, "node1", 29500), "torchrun"),
    ({"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
      "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1"}, Place(3, 4, 1, 2, None, None), "horovodrun"),
    ({"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, Place(6, 16, 2, 8, None, None), "mpirun"),
    ({"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "8(x2)",
      "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "4242"},
     Place(9, 16, 1, 8, "gpu07", 24242), "srun"),
    ({}, Place(0, 1, 0, 1, "127.0.0.1", 0), "single"),
])
def test_each_launcher_places_the_rank_exactly(env, want, launcher):
    assert place(env) == want
    assert detect_launcher(env) == launcher


def test_a_user_rendezvous_wins_and_slurm_node_lists_read_right():
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "head", "MASTER_PORT": "1234"}
    assert place(env) == Place(0, 2, 0, 1, "head", 1234)
    assert first_host("a100-[003-007,9],cpu1") == "a100-003"
    assert first_host("n1,n2") == "n1" and first_host("") is None


def test_torchrun_argv_one_node_and_several():
    worker = ("/v/bin/hvdbench", "train", "bert", "--engine", "fsdp")
    argv, _ = torchrun.build(Job(Layout(1, 2, ("localhost",)), worker, torchrun_dir()), {}, binary="torchrun")
    assert argv == ["torchrun", "--standalone", "--nnodes", "1", "--nproc-per-node", "2", "--log-dir",
                    "/r/1x2-r1/logs", "--no-python", *worker]
    argv, _ = torchrun.build(Job(Layout(2, 4, ("n1", "n2")), worker, torchrun_dir()), {"HVDBENCH_X": "1"},
                             binary="torchrun")
    at = argv.index("torchrun")
    assert argv[1:at] == ["-np", "2", "-H", "n1:1,n2:1", "--map-by", "ppr:1:node", "--bind-to", "none",
                          "-x", "HVDBENCH_X"]  # one agent per node, started by mpirun
    assert argv[at:] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "4", "--log-dir", "/r/1x2-r1/logs",
                         "--rdzv-backend", "c10d", "--rdzv-endpoint", "n1:29400", "--rdzv-id", "1x2-r1",
                         "--no-python", *worker]
    with pytest.raises(ValueError, match="needs their host names"):
        torchrun.build(Job(Layout(2, 4), worker, torchrun_dir()), {})


def torchrun_dir():
    from pathlib import Path

    return Path("/r/1x2-r1")


# --- sweep --engines ----------------------------------------------------------------------------


def test_sweep_engines_run_each_layout_under_each_engine(tmp_path):
    from hvdbench.errors import UsageError
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.launch import train_worker
    from hvdbench.sweep.options import SweepOptions

    def sweep(out, *train, **given):
        return build_spec(SweepOptions(tmp_path / out, "resnet50", train, hosts="localhost:2", **given))

    spec = sweep("s", "--flavor", "debug", "--synthetic", engines=("horovod", "ddp"))
    assert [r.run_id for r in spec.runs] == ["1x1-horovod-r1", "1x1-ddp-r1", "1x2-horovod-r1", "1x2-ddp-r1"]
    assert [e.train.engine for e in spec.entries] == ["horovod", "ddp", "horovod", "ddp"]
    argv = train_worker(spec, spec.runs[1])
    assert argv[argv.index("--engine") + 1] == "ddp"
    with pytest.raises(UsageError, match="not both"):
        sweep("t", "--synthetic", "--engine", "ddp", engines=("horovod", "ddp"))
    with pytest.raises(UsageError, match="'zero3' is not one of"):
        sweep("u", "--synthetic", engines=("zero3",))
    with pytest.raises(ConfigError) as e:
        sweep("v", "--synthetic", launcher="torchrun")
    assert str(e.value) == ("sweep of resnet50: --launcher torchrun starts torch.distributed ranks, which Horovod "
                            "cannot join: use --engine ddp or fsdp, or launch --engine horovod with horovodrun, mpirun "
                            "or srun")


# --- memory per engine ----------------------------------------------------------------------------


def test_fsdp_divides_weights_gradients_and_optimizer_state_by_the_ranks():
    spec = get_spec("llama2_lora")
    from types import SimpleNamespace

    run = SimpleNamespace(flavor="70b", framework="torch", precision="bf16", optimizer="adamw", engine="horovod",
                          batch_per_gpu=1)
    whole = memory.state_bytes(spec, run)
    assert memory.state_bytes(spec, memory.run_of(run, engine="ddp"), ranks=8) == whole
    assert memory.state_bytes(spec, memory.run_of(run, engine="fsdp"), ranks=8) == whole / 8
    # 69.0B frozen bf16 weights (2 bytes) + 44.6M adapters x 16 bytes (weights, gradients, AdamW's two)
    assert whole == 68_976_648_192 * 2 + 44_564_480 * 16
    horovod = memory.estimate(spec, run)
    fsdp = memory.estimate(spec, memory.run_of(run, engine="fsdp"), ranks=2)
    assert horovod.fixed - fsdp.fixed == pytest.approx(whole / 2 + memory.FUSION_BUFFER, abs=1)


def test_the_gpu_check_says_which_engine_and_how_many_gpus_of_what_size(tmp_path):
    spec = get_spec("llama2_lora")

    def cfg(engine, flavor="70b"):
        return resolve({"model": "llama2_lora", "flavor": flavor, "synthetic": True, "engine": engine,
                        "precision": "bf16", "out": str(tmp_path)})

    h100 = 80 * 10**9
    with pytest.raises(ConfigError) as e:
        memory.check_device_fits(spec, cfg("fsdp"), 2, h100, "NVIDIA H100 80GB HBM3")
    assert str(e.value) == ("llama2_lora/70b under --engine fsdp holds ~69 GB of weights, gradients and optimizer "
                            "state per GPU (139 GB in all), more than 75% of one NVIDIA H100 80GB HBM3 (80 GB); it "
                            "needs at least 3 GPUs of 80 GB (this job has 2)")
    memory.check_device_fits(spec, cfg("fsdp"), 8, h100)  # the reference's 8 x 80 GB holds it
    memory.check_device_fits(spec, cfg("ddp", "13b"), 8, h100)  # 26 GB of base: a replica per GPU
    base = resolve({"model": "llama2_lora", "flavor": "13b", "synthetic": True, "precision": "bf16",
                    "out": str(tmp_path)})
    with pytest.raises(ConfigError, match="--engine fsdp shards them: at least 2 GPUs of 24 GB"):
        memory.check_device_fits(spec, base, 4, 24 * 10**9)


# --- the trainer's pieces --------------------------------------------------------------------------


def test_parameter_groups_follow_the_parameters_fsdp_puts_in_their_place():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LayerNorm(3))
    groups = [{"params": [model[0].weight], "weight_decay": 0.1, "max_grad_norm": 1.0},
              {"params": [model[0].bias, model[1].weight, model[1].bias], "weight_decay": 0.0}]
    before = {id(p): name for name, p in model.named_parameters()}
    after = {name: torch.nn.Parameter(p.detach().clone()) for name, p in model.named_parameters()}
    remapped = remap_groups(groups, before, after)
    assert remapped[0]["params"][0] is after["0.weight"] and remapped[0]["max_grad_norm"] == 1.0
    assert [id(p) for p in remapped[1]["params"]] == [id(after[n]) for n in ("0.bias", "1.weight", "1.bias")]


# --- the report's engine table ---------------------------------------------------------------------


def _run(layout, engine, throughput, comm, run_id):
    nodes, gpus = map(int, layout.split("x"))
    return LoadedRun(run_id=run_id, model="resnet50", flavor="debug", framework="torch", engine=engine,
                     precision="fp32", batch_per_gpu=32, world_size=nodes * gpus, nodes=nodes, gpus_per_node=gpus,
                     layout=layout, scale="up", devices="cpu", throughput=throughput, data_s=0.0, compute_s=0.010,
                     comm_s=comm, update_s=0.001, other_s=0.0, shard_parameters=100 if engine != "fsdp" else 50)


def test_the_engine_table_compares_each_engine_with_horovod_and_says_why():
    runs = [_run("1x2", "horovod", 1000.0, 0.004, "a"), _run("1x2", "horovod", 1020.0, 0.004, "b"),
            _run("1x2", "ddp", 1200.0, 0.001, "c"), _run("1x2", "ddp", 1180.0, 0.001, "d"),
            _run("1x1", "horovod", 800.0, 0.0, "e")]  # one engine only at 1x1: no comparison there
    tables = build_tables(runs)
    rows = engines.engine_rows(runs, tables.scaling)
    assert [(r.layout, r.engine) for r in rows] == [("1x2", "horovod"), ("1x2", "ddp")]
    ddp = rows[1]
    assert ddp.vs_reference == pytest.approx(1190.0 / 1010.0)
    assert ddp.comm_ms == pytest.approx(1.0) and rows[0].comm_ms == pytest.approx(4.0)
    assert ddp.why == "comm -3.0 ms" and ddp.within_noise is False
    assert "| resnet50 | 1x2 | ddp | 2 |" in engines.markdown(rows)


def test_a_study_names_engines_for_all_its_models_or_one(tmp_path):
    from hvdbench.study.schema import load_study

    path = tmp_path / "s.yaml"
    path.write_text("study: s\nreproduces: x\nlayouts: [1x1, 1x2]\nengines: [horovod, ddp]\n"
                    "models:\n  resnet50: {synthetic: true}\n  bert: {synthetic: true, engines: [fsdp]}\n")
    study = load_study(path)
    assert study.engines == ("horovod", "ddp")
    assert study.models["resnet50"].engines == () and study.models["bert"].engines == ("fsdp",)
    path.write_text("study: s\nreproduces: x\nlayouts: [1x1]\nengines: [horovod, zero3]\n"
                    "models:\n  resnet50: {synthetic: true}\n")
    with pytest.raises(ConfigError, match=r"engines\[1\] 'zero3' is not one of horovod, ddp, fsdp"):
        load_study(path)


def test_cpu_offload_on_a_cpu_run_is_refused_in_one_line(tmp_path):
    from types import SimpleNamespace

    from hvdbench.train import worker

    cfg = resolve({"model": "bert", "flavor": "debug", "synthetic": True, "engine": "fsdp", "fsdp_offload": True,
                   "out": str(tmp_path)})
    dist = SimpleNamespace(device_name="cpu", rank=0)
    with pytest.raises(worker.AgreedError, match="--fsdp-offload moves fsdp's shards from the GPUs"):
        worker._check_precision_on_cpu(cfg, get_spec("bert"), dist)
    worker._check_precision_on_cpu(resolve({"model": "bert", "flavor": "debug", "synthetic": True, "engine": "fsdp",
                                            "out": str(tmp_path)}), get_spec("bert"), dist)  # without: fine
