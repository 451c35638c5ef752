# Issue 37's compute figures on one GPU: `bench compute` (matmul TFLOP/s per precision, copy bandwidth,
# beside the datasheet peaks), and one run each of ResNet-50 and BERT-large recording model TFLOP/s,
# MFU, peak memory (allocated, reserved, estimate) and NVML energy (J/sample, W/GPU).
# Sourced by benchmarks/gpu/run.sh (it uses run.sh's `step`, $PY and $OUT), then:
#
#   compute_checks                        # ~3 minutes on an H100; ONLY="compute-bench ..." picks steps
#
# No Horovod needed: the runs are `--engine ddp` under torchrun (one rank), and `bench compute` meets
# its ranks over torch.distributed. nvidia-ml-py (pynvml) must be importable for the energy columns.
compute_checks() {
  step compute-bench 240 "$PY" -m hvdbench bench compute --out "$OUT/runs/compute-bench"
  local run=(torchrun --standalone --nproc-per-node 1 -m hvdbench train --engine ddp --synthetic --precision bf16)
  step compute-r50 300 "${run[@]}" resnet50 --flavor full --batch-per-gpu 256 --steps 100 --warmup-steps 20 \
    --out "$OUT/runs/compute-r50"
  step compute-bert 300 "${run[@]}" bert --flavor large --batch-per-gpu 32 --steps 50 --warmup-steps 10 \
    --out "$OUT/runs/compute-bert"
  step compute-summary 60 "$PY" - "$OUT" <<'PY'
import csv, json, pathlib, sys
out = pathlib.Path(sys.argv[1]) / "runs"
bench = out / "compute-bench" / "bench_compute.csv"
if bench.exists():
    for r in csv.DictReader(bench.open()):
        figure = f"{float(r['tflops']):8.1f} TFLOP/s" if r["tflops"] else f"{float(r['gb_s']):8.1f} GB/s" if r["gb_s"] else ""
        print(f"bench compute {r['device']} {r['op']:6s} {r['dtype']:4s} n={r['size']:>10s} {figure:>16s}"
              + (f"  peak {r['peak_tflops']} ({100 * float(r['vs_peak']):.0f} %)" if r["vs_peak"] else "") + f"  {r['note']}")
for name in ("compute-r50", "compute-bert"):
    path = out / name / "result.json"
    if not path.exists():
        print(f"{name}: no result"); continue
    r = json.loads(path.read_text())
    fmt = lambda k, f=".3g", scale=1: "–" if r.get(k) is None else format(r[k] * scale, f)
    print(f"{name}: {r['devices']} {r['precision']} {r['engine']} {fmt('throughput', ',.1f')} samples/s, "
          f"{fmt('flops_per_sample')} FLOPs/sample, {fmt('model_tflops_per_gpu', '.1f')} TFLOP/s/GPU, "
          f"MFU {fmt('mfu', '.1f', 100)} % of {fmt('peak_tflops', 'g')}; memory allocated {fmt('mem_allocated_gb', '.1f')} "
          f"reserved {fmt('mem_reserved_gb', '.1f')} GB (estimate {fmt('mem_estimate_gb', '.1f')}), resident "
          f"{fmt('mem_resident_gb', '.1f')} GB; {fmt('energy_j_per_sample', '.3g')} J/sample, "
          f"{fmt('power_w_per_gpu', '.0f')} W/GPU" + (f"; error: {r['error']}" if r.get("error") else ""))
PY
  cat "$OUT/logs/compute-summary.log"
}
