#!/usr/bin/env bash
# make demo: the main job on built-in data, end to end.
#   1. prepare scikit-learn's bundled digits into HDF5 shards;
#   2. as root, bring up a 2-node emulated cluster (network namespaces, 2 slots each) with the
#      inter-node link shaped to $DEMO_BANDWIDTH; otherwise run local layouts only, and say so;
#   3. sweep ResNet-50 (debug flavor, PyTorch) over 1x1, 1x2 and 2x1 with 3 repeats: throughput,
#      then time-to-accuracy (to the debug flavor's 0.95 top-1 on the digits);
#   4. report throughput, speed-up, efficiency, scale-up vs scale-out and MLPerf time-to-train;
#      print the file paths.
# Each demo writes a new directory under demo-out/, so earlier results are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.venv/bin"
HVD="$BIN/hvdbench"
OUT="${DEMO_OUT:-$PWD/demo-out}"
RUN="$OUT/$(date +%Y%m%d-%H%M%S)"
BANDWIDTH="${DEMO_BANDWIDTH:-100mbit}"
REPEATS="${DEMO_REPEATS:-3}"
CLUSTER=hvddemo
TRAIN_ARGS=(--framework torch --flavor debug --data "$OUT/digits" --batch-per-gpu 32
            --steps 150 --warmup-steps 20)
t0=$SECONDS

echo "== 1. built-in data: scikit-learn digits -> $OUT/digits"
[ -f "$OUT/digits/manifest.json" ] || "$HVD" prepare digits --out "$OUT/digits"

echo "== 2. hosts"
if [ "$(id -u)" = 0 ] && "$HVD" cluster up --name "$CLUSTER" --nodes 2 --slots 2 \
      --bandwidth "$BANDWIDTH" --subnet 10.231.7.0/24; then
  trap '"$HVD" cluster down --name "$CLUSTER" >/dev/null' EXIT
  HOSTS=(--cluster "$CLUSTER" --layouts 1x1,1x2,2x1)
  echo "emulated cluster '$CLUSTER': 2 nodes x 2 slots, inter-node link shaped to $BANDWIDTH"
else
  HOSTS=(--hosts localhost:2 --layouts 1x1,1x2)
  echo "NOTE: no emulated cluster (needs root and network namespaces): local layouts 1x1 and 1x2 only"
fi

echo "== 3a. sweep: ResNet-50 debug throughput x $REPEATS repeats"
"$HVD" sweep resnet50 "${HOSTS[@]}" --repeats "$REPEATS" --timeout 300 --name demo --out "$RUN/sweep" \
    -- "${TRAIN_ARGS[@]}"

echo "== 3b. sweep: ResNet-50 debug time-to-accuracy (top-1 0.95) x $REPEATS repeats"
"$HVD" sweep resnet50 "${HOSTS[@]}" --repeats "$REPEATS" --timeout 300 --name demo-tta --out "$RUN/sweep-tta" \
    -- --framework torch --flavor debug --data "$OUT/digits"

echo "== 4. report"
"$HVD" report "$RUN/sweep" "$RUN/sweep-tta" --out "$RUN/report"
echo "demo finished in $((SECONDS - t0))s; results: $RUN"
