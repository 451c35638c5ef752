#!/usr/bin/env bash
# The `full` flavors on one GPU, on a machine with no package registry: build Horovod with NCCL,
# then measure ResNet-50 and BERT-large as users run them, and hvdbench against a bare PyTorch loop.
#
#   bash benchmarks/gpu/run.sh [OUT_DIR]
#   ONLY="r50-fp16 digits-tta" bash benchmarks/gpu/run.sh     # only these measurements (after the build)
#
# Needs .gpu/horovod-0.28.1.tar.gz and, in .gpu/deps/, the wheels of what the machine lacks
# (see benchmarks/gpu/README.md); PyTorch with CUDA, nvcc and cmake must be there. Every step
# writes its log under OUT_DIR; OUT_DIR/gpu-results.tgz holds them all; the summary is printed last.
. "$(dirname "$0")/common.sh" gpu-out "$@"
T0=$SECONDS

# step NAME SECONDS CMD...: run CMD with a time limit, its output in OUT/logs/NAME.log; go on when it fails.
# With ONLY set, measurements (not the set-up steps) whose name it does not list are skipped.
SETUP_STEPS=" facts deps build install check-build "
step() {
  local name="$1" limit="$2"; shift 2
  local t=$SECONDS rc=0
  if [ -n "${ONLY:-}" ] && [[ "$SETUP_STEPS" != *" $name "* ]] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  timeout --kill-after=10 "$limit" "$@" >"$OUT/logs/$name.log" 2>&1 || rc=$?
  printf '[gpu] %-18s rc=%d %4ds (total %ds)\n' "$name" "$rc" $((SECONDS - t)) $((SECONDS - T0))
  [ "$rc" = 0 ] || tail -n 15 "$OUT/logs/$name.log"
  return "$rc"
}

step facts 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  nvcc --version | tail -2; cmake --version | head -1; command -v mpicc || echo "no mpicc: Gloo only"; nproc
  "$0" -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.get_device_name(0))"' "$PY"
# Horovod's setup.py needs cffi at build time; hvdbench needs mlperf-logging.
step deps 120 "$PY" -m pip install -q --no-index --no-deps --target /tmp/hvdbench-site .gpu/deps/*.whl

# A wheel built by an earlier run comes back in 15 MB parts (a returned file may not exceed 16 MiB);
# carried in .gpu/ again, it saves the build.
mkdir -p /tmp/hvd-wheel
if [ -f .gpu/wheel-name ]; then
  cat .gpu/wheel-part-* >"/tmp/hvd-wheel/$(cat .gpu/wheel-name)"
else
  step build 420 bash scripts/build_horovod.sh .gpu/horovod-0.28.1.tar.gz /tmp/hvd-wheel "$PY" || exit 1
  (cd /tmp/hvd-wheel && ls horovod-*.whl >"$OUT/wheel-name" && split -b 15M horovod-*.whl "$OUT/wheel-part-")
fi
step install 120 "$PY" -m pip install --no-deps --force-reinstall /tmp/hvd-wheel/horovod-*.whl || exit 1
step check-build 120 horovodrun --check-build || exit 1
grep -E "\[X\]" "$OUT/logs/check-build.log" | tr -s ' ' | paste -sd' '

# hvdbench train as users run it, one rank on the GPU through horovodrun (Gloo; NCCL for the tensors).
train() {
  local name="$1"; shift
  step "$name" 240 horovodrun -np 1 -H localhost:1 --gloo "$PY" -m hvdbench train "$@" --out "$OUT/runs/$name"
}
train r50-bf16 resnet50 --flavor full --synthetic --precision bf16 --batch-per-gpu 256 --steps 100 --warmup-steps 20
train r50-fp32 resnet50 --flavor full --synthetic --precision fp32 --batch-per-gpu 256 --steps 50 --warmup-steps 10
train bert-large-bf16 bert --flavor large --synthetic --precision bf16 --batch-per-gpu 32 --steps 50 --warmup-steps 10
# The paths that only a GPU takes: fp16 with loss scaling (GradScaler around Horovod's synchronize),
# gradient accumulation, fp16 compression of the allreduce.
train r50-fp16 resnet50 --flavor full --synthetic --precision fp16 --batch-per-gpu 256 --steps 30 --warmup-steps 10
train r50-bf16-accum2 resnet50 --flavor full --synthetic --precision bf16 --batch-per-gpu 128 --accum-steps 2 \
  --steps 30 --warmup-steps 10
train r50-bf16-fp16allreduce resnet50 --flavor full --synthetic --precision bf16 --batch-per-gpu 256 \
  --fp16-allreduce --steps 30 --warmup-steps 10
# Time-to-accuracy on the GPU: the debug ResNet on the built-in digits to its 0.95 target.
step prepare-digits 120 "$PY" -m hvdbench prepare digits --out /tmp/hvdbench-digits
train digits-tta resnet50 --flavor debug --data /tmp/hvdbench-digits

# hvdbench's loop vs a bare PyTorch loop, alternately in one process (benchmarks/bench_train.py);
# the second time the bare loop also keeps its parameters channels-last, which Horovod cannot.
bare() {
  local name="$1"; shift
  step "$name" 240 "$PY" benchmarks/bench_train.py --only bare --flavor full --batch 256 --precision bf16 \
    --steps 40 --warmup 10 --rounds 4 --threads 8 --out "$OUT/runs/$name.json" "$@"
}
bare bare-nchw-params
bare bare-nhwc-params --bare-nhwc-params
# Horovod's background thread batches tensors every HOROVOD_CYCLE_TIME ms (default 1): the last
# gradients of a step wait for that cycle.
HOROVOD_CYCLE_TIME=0.1 bare bare-cycle0.1ms
# The same loop vs Horovod's own synthetic-benchmark method (DistributedOptimizer, no hvdbench) at
# one rank: what is left of the gap to the bare loop is Horovod's, not hvdbench's.
step horovod-method 240 "$PY" benchmarks/bench_train.py --only horovod --horovod-np 1 --flavor full --batch 256 \
  --precision bf16 --steps 40 --warmup 10 --rounds 4 --threads 8 --out "$OUT/runs/horovod-method.json"

# Real HDF5 images at 224x224 (uint8, read and normalised like ImageNet shards) vs --synthetic.
step prepare-images 120 "$PY" -m hvdbench prepare synthetic --like images --samples 12000 --size 224 \
  --out /tmp/hvdbench-images
train r50-bf16-hdf5 resnet50 --flavor full --data /tmp/hvdbench-images --precision bf16 --batch-per-gpu 256 \
  --steps 100 --warmup-steps 20

# Issue 37: bench compute, and MFU, memory and energy of one ResNet-50 and one BERT-large run.
source benchmarks/gpu/compute.sh
compute_checks
# The levers of issue 37, each on and off (their own table; no Horovod needed).
step levers 420 bash benchmarks/gpu/levers.sh "$OUT/levers"

"$PY" - "$OUT" <<'PY' | tee "$OUT/logs/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("\nsummary")
for run in sorted((out / "runs").glob("*/result.json")):
    r = json.loads(run.read_text())
    print(f"  {run.parent.name:22s} {r['status']:8s} {r.get('devices') or '':24s} {r.get('throughput') or 0:10,.1f} "
          f"samples/s  step {1e3 * (r.get('step_time_mean_s') or 0):6.1f} ms  params {r.get('parameters') or 0:,}"
          + (f"  {r['metric_name']} {r['final_metric']:.4f} after {r['epochs']:g} epochs, time-to-train "
             f"{r['time_to_train_s']:.1f} s" if r["mode"] == "time_to_accuracy" and r.get("epochs") else "")
          + (f"  error: {r['error']}" if r.get("error") else ""))
for bench in sorted((out / "runs").glob("*.json")):
    b = next(iter(v for k, v in json.loads(bench.read_text()).items() if k in ("bare", "horovod")))
    print(f"  {bench.stem}: hvdbench / baseline (ResNet-50 full, bf16, batch 256) median "
          f"{b['median_ratio']:.3f}; rounds {', '.join(f'{q:.3f}' for q in b['ratios'])}; hvdbench "
          f"{', '.join(f'{x:,.0f}' for x in b['hvdbench'])}; baseline {', '.join(f'{x:,.0f}' for x in b['baseline'])}")
PY
tar -czf "$OUT/gpu-results.tgz" -C "$OUT" logs runs
rm -rf "$OUT/logs" "$OUT/runs"
