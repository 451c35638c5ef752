#!/usr/bin/env bash
# The levers of issues 37 and 46 on one GPU, each on and off: hvdbench train as users run it (one
# process, --engine ddp: no Horovod needed), ResNet-50 (batch 256), the LLMs' one-GPU flavors (full-4l,
# bf16 and fp8; llama2_lora's 70b-4l), BERT-large (batch 32, LAMB, unpacked and packed rows), bf16, synthetic data, then hvdbench against a bare
# PyTorch loop given the same levers. A summary table
# (samples/s, MLPerf's samples/s where a row holds several (BERT's packed rows: sequences/s), step,
# compile seconds, MFU where the run recorded it, the share of MLPerf's published per-GPU rate where
# there is one (hvdbench/published.py), the ratio to each model's run without levers) is printed last
# and written to OUT_DIR/levers.txt.
#
#   bash benchmarks/gpu/levers.sh [OUT_DIR]                   # on a GPU machine: at most ~9.5 minutes
#   ONLY="r50-base r50-compile" bash benchmarks/gpu/levers.sh  # only these steps
#   DEVICE=cpu FLAVOR=debug bash benchmarks/gpu/levers.sh /tmp/levers   # the script's logic on a CPU
#
# Steps run in order of what they tell (the biggest lever first), each under `timeout` and never past
# BUDGET_S seconds (default 540 on a GPU, 900 on a CPU) and 30 s more: the steps left then are skipped
# and say so, so the whole script fits its device time. Environment: PYTHON (default python3), ENGINE (ddp; horovod
# where it is built), DEVICE (gpu|cpu), FLAVOR (full|debug: the models' flavors for GPUs or CPUs),
# STEPS and WARMUP (timed and warm-up steps of each run), BUDGET_S. Called from benchmarks/gpu/run.sh,
# or alone.
. "$(dirname "$0")/common.sh" levers-out "$@"
DEVICE="${DEVICE:-gpu}" ENGINE="${ENGINE:-ddp}"
if [ "$DEVICE" = cpu ]; then
  # The debug flavors, fp32, a few steps: checks that every step runs, not what the levers gain.
  FLAVOR="${FLAVOR:-debug}" R50_FLAVOR=debug BERT_FLAVOR=debug LLM_FLAVOR=debug LORA_FLAVOR=debug PRECISION=fp32
  R50_BATCH=16 BERT_BATCH=4
  STEPS="${STEPS:-4}" WARMUP="${WARMUP:-3}" LIMIT=300 THREADS=1 BUDGET_S="${BUDGET_S:-900}"
  export CUDA_VISIBLE_DEVICES=""
else
  FLAVOR="${FLAVOR:-full}" R50_FLAVOR=full BERT_FLAVOR=large LLM_FLAVOR=full-4l LORA_FLAVOR=70b-4l PRECISION=bf16
  R50_BATCH=256 BERT_BATCH=32
  STEPS="${STEPS:-30}" WARMUP="${WARMUP:-8}" LIMIT=150 THREADS=8 BUDGET_S="${BUDGET_S:-540}"
fi
if [ "$FLAVOR" = debug ]; then R50_FLAVOR=debug BERT_FLAVOR=debug LLM_FLAVOR=debug LORA_FLAVOR=debug; fi
T0=$SECONDS

# step NAME SECONDS CMD...: CMD under a time limit, its output in OUT/logs/NAME.log; goes on when it fails.
step() {
  local name="$1" limit="$2"; shift 2
  if [ -n "${ONLY:-}" ] && [[ " deps facts $ONLY " != *" $name "* ]]; then return 0; fi
  # A step gets at most what is left of the budget and 30 s more; with under 20 s left it is skipped.
  local left=$((BUDGET_S - (SECONDS - T0)))
  if [ "$left" -lt 20 ]; then
    printf '[levers] %-16s skipped: %ds of the %ds budget gone\n' "$name" $((SECONDS - T0)) "$BUDGET_S"
    echo "skipped" >"$OUT/logs/$name.skipped"
    return 0
  fi
  [ "$limit" -le $((left + 30)) ] || limit=$((left + 30))
  local t=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$OUT/logs/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$OUT/logs/$name.rc"
  printf '[levers] %-16s rc=%d %4ds (total %ds)\n' "$name" "$rc" $((SECONDS - t)) $((SECONDS - T0))
  [ "$rc" = 0 ] || tail -n 8 "$OUT/logs/$name.log"
  return 0
}

# train NAME MODEL OPTIONS...: hvdbench train, one process, synthetic data, the run's record in OUT/runs/NAME.
train() {
  local name="$1" model="$2"; shift 2
  step "$name" "$LIMIT" "$PY" -m hvdbench train "$model" --engine "$ENGINE" --synthetic --precision "$PRECISION" \
    --steps "$STEPS" --warmup-steps "$WARMUP" --threads "$THREADS" --out "$OUT/runs/$name" "$@"
}
r50() { local name="$1"; shift; train "$name" resnet50 --flavor "$R50_FLAVOR" --batch-per-gpu "$R50_BATCH" "$@"; }
bert() { local name="$1"; shift; train "$name" bert --flavor "$BERT_FLAVOR" --batch-per-gpu "$BERT_BATCH" "$@"; }
# The language models' one-GPU flavors (full-4l: full width, vocabulary and 8,192-token sequences at 4
# layers), one sequence a step; base: the plain loss, nothing recomputed, eager.
l8() { local name="$1"; shift; train "$name" llama31_8b --flavor "$LLM_FLAVOR" --batch-per-gpu 1 "$@"; }
oss() { local name="$1"; shift; train "$name" gpt_oss_20b --flavor "$LLM_FLAVOR" --batch-per-gpu 1 "$@"; }
# Llama 2 70B LoRA's layer (70b-4l: its width, vocabulary, adapters and 8,192 tokens at 4 layers).
lora() { local name="$1"; shift; train "$name" llama2_lora --flavor "$LORA_FLAVOR" --batch-per-gpu 1 "$@"; }

# Alone on a fresh machine: the wheels run.sh installs (mlperf-logging: benchmarks/gpu/README.md).
if ! "$PY" -c "import mlperf_logging" 2>/dev/null && ls .gpu/deps/*.whl >/dev/null 2>&1; then
  step deps 120 "$PY" -m pip install -q --no-index --no-deps --target /tmp/hvdbench-site .gpu/deps/*.whl
fi
step facts 30 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
# The biggest lever first: torch.compile (the bare compiled loop reached 5,644 images/s on an H100).
r50 r50-base
r50 r50-all --compile default --channels-last --fused-optimizer
# hvdbench's loop against a bare loop given the same levers, alternately in one process (goal >= 0.99).
step bare-levers $((2 * LIMIT)) "$PY" benchmarks/bench_train.py --only bare --engine "$ENGINE" --flavor "$R50_FLAVOR" \
  --batch "$R50_BATCH" --precision "$PRECISION" --steps "$STEPS" --warmup "$WARMUP" --rounds 2 --threads "$THREADS" \
  --compile default --channels-last --fused-optimizer --out "$OUT/runs/bare-levers.json"
# Llama 3.1 8B's layer (issue 46: goal >= 40 % MFU in bf16, >= 55 % of the bf16 peak in fp8): each lever
# alone, all together, then fp8 (torchao's float8 linears; refused in one line below compute capability 8.9).
l8 l8-base --loss-chunks 0 --activation-checkpointing none
l8 l8-all --loss-chunks 8 --compile default --fused-optimizer
l8 l8-fp8 --loss-chunks 8 --compile default --fused-optimizer --precision fp8
l8 l8-chunks --loss-chunks 8
l8 l8-compile --loss-chunks 0 --compile default
l8 l8-selective --loss-chunks 0 --activation-checkpointing selective
oss oss-base
oss oss-all --compile default --fused-optimizer
lora lora-base
lora lora-all --compile default --loss-chunks 8 --fused-optimizer
bert bert-base
# MLPerf's rows: synthetic packed rows with the Wikipedia data's lengths (~2 sequences a row, up to 3),
# counted in sequences as MLPerf counts them (issue 46: goal >= 760 sequences/s per H100, 830 per H200).
bert bert-packed --synthetic-kind bert_packed
# Compiled layer by layer (no graph break on the data's sizes) with LAMB's update compiled once.
bert bert-packed-compile --synthetic-kind bert_packed --compile default --fused-optimizer
bert bert-packed-fp8 --synthetic-kind bert_packed --compile default --fused-optimizer --precision fp8
# llama31_8b's layer: hvdbench against a bare loop over the same model code (its loss, parameter groups,
# optimizer) and levers (after BERT's packed rows: it takes up to two runs' time, compiles included).
step bare-l8 $((2 * LIMIT)) "$PY" benchmarks/bench_train.py --only bare --model llama31_8b --engine "$ENGINE" \
  --flavor "$LLM_FLAVOR" --batch 1 --precision "$PRECISION" --steps "$STEPS" --warmup "$WARMUP" --rounds 2 \
  --threads "$THREADS" --compile default --fused-optimizer --out "$OUT/runs/bare-l8.json"
bert bert-varlen --attention varlen
bert bert-compile-varlen --compile default --attention varlen
r50 r50-compile --compile default
r50 r50-channels-last --channels-last
r50 r50-fused --fused-optimizer
# LAMB's update compiled: ~390 tensors in two groups, each group's compiled once (the step count and
# learning rate are tensor inputs), so it comes late; its compile may take a minute or more.
bert bert-fused --fused-optimizer
bert bert-all --compile default --attention varlen --fused-optimizer
# CUDA graphs on top of compile (torch.compile's reduce-overhead), last: at these batch sizes a step
# is GPU-bound, so little is expected of it. On a CPU both runs are refused in one line, as they should be.
r50 r50-cudagraphs --compile reduce-overhead --channels-last --fused-optimizer
bert bert-packed-cudagraphs --synthetic-kind bert_packed --compile reduce-overhead --fused-optimizer

"$PY" - "$OUT" <<'PY' | tee "$OUT/levers.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("\nlevers (each model's runs against its run without levers, `base`)")
print(f"  {'run':18s} {'status':8s} {'samples/s':>10s} {'seq/s':>8s} {'vs base':>8s} {'step ms':>8s} "
      f"{'compile s':>9s} {'MFU':>6s} {'vs MLPerf':>9s}  device")
base = {}
for run in sorted((out / "runs").glob("*/result.json"), key=lambda p: (p.parent.name.split("-")[0], p.stat().st_mtime)):
    r = json.loads(run.read_text())
    name, model = run.parent.name, run.parent.name.split("-")[0]
    tput = r.get("throughput")
    if name.endswith("-base") and tput:
        base[model] = tput
    ratio = f"{tput / base[model]:.3f}" if tput and base.get(model) else ""
    cell = lambda v, f: format(v, f) if v is not None else ""
    per_row = r.get("mlperf_samples_per_row")  # sequences a row, where the rows held several of MLPerf's samples
    print(f"  {name:18s} {r['status']:8s} {cell(tput, ',.1f'):>10s} "
          f"{cell(tput and per_row and tput * per_row, ',.1f'):>8s} {ratio:>8s} "
          f"{cell(r.get('step_time_mean_s') and 1e3 * r['step_time_mean_s'], '.1f'):>8s} "
          f"{cell(r.get('compile_s'), '.1f'):>9s} {cell(r.get('mfu'), '.3f'):>6s} "
          f"{cell(r.get('published_share'), '.3f'):>9s}  {r.get('devices') or ''}"
          + (f"  error: {r['error']}" if r.get("error") else ""))
for skipped in sorted((out / "logs").glob("*.skipped")):
    print(f"  {skipped.stem:18s} skipped (budget)")
for rc in sorted((out / "logs").glob("*.rc")):
    code = int(rc.read_text())
    if code:
        print(f"  {rc.stem:18s} exit {code}" + (" (timed out)" if code in (124, 137) else "")
              + f": logs/{rc.stem}.log")
for name, levers in (("bare-levers", "compile + channels-last + fused SGD (ResNet-50)"),
                     ("bare-l8", "compile per layer + fused AdamW (llama31_8b)")):
    bench = out / "runs" / f"{name}.json"
    if bench.exists():
        b = json.loads(bench.read_text())["bare"]
        print(f"  hvdbench / bare loop, both with {levers}: median "
              f"{b['median_ratio']:.3f}; rounds {', '.join(f'{q:.3f}' for q in b['ratios'])}; hvdbench "
              f"{', '.join(f'{x:,.1f}' for x in b['hvdbench'])}; bare {', '.join(f'{x:,.1f}' for x in b['baseline'])}"
              + (f"; compile s {b['compile_s']}" if b.get("compile_s") else ""))
PY
tar -czf "$OUT/levers-results.tgz" -C "$OUT" logs runs
