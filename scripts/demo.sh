#!/usr/bin/env bash
# make demo: the main job on built-in data, end to end, as a study (hvdbench/studies/demo.yaml).
#   1. as root, bring up a 2-node emulated cluster (network namespaces, 2 slots each) with the
#      inter-node link shaped to $DEMO_BANDWIDTH; otherwise run local layouts only, and say so;
#   2. study: every model with a debug flavor (ResNet-50, BERT, Transformer, GNMT, NCF, Llama2 LoRA,
#      Stable Diffusion) over 1x1, 1x2 and 2x1, throughput, 2 repeats; each model's built-in data is
#      prepared on first use;
#   3. sweep ResNet-50 (debug flavor) for time-to-accuracy (0.95 top-1 on the digits), 2 repeats;
#   4. report throughput, speed-up, efficiency, scale-up vs scale-out, MLPerf time-to-train, the
#      waterfall of each layout's loss, the speed-up across models and a prediction of layouts not
#      run (2x2 and 4x1 on the emulated cluster); print the file paths.
# Each demo writes a new directory under demo-out/ (the prepared data is shared and kept).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.venv/bin"
HVD="$BIN/hvdbench"
OUT="${DEMO_OUT:-$PWD/demo-out}"
RUN="$OUT/$(date +%Y%m%d-%H%M%S)"
BANDWIDTH="${DEMO_BANDWIDTH:-100mbit}"
REPEATS="${DEMO_REPEATS:-2}"  # 3 took it past 10 minutes on 2 cores
STUDY_REPEATS="${DEMO_STUDY_REPEATS:-2}"
CLUSTER=hvddemo
t0=$SECONDS

echo "== 1. hosts"
if [ "$(id -u)" = 0 ] && "$HVD" cluster up --name "$CLUSTER" --nodes 2 --slots 2 \
      --bandwidth "$BANDWIDTH" --subnet 10.231.7.0/24; then
  trap '"$HVD" cluster down --name "$CLUSTER" >/dev/null' EXIT
  HOSTS=(--cluster "$CLUSTER" --layouts 1x1,1x2,2x1)
  PREDICT=2x2,4x1
  echo "emulated cluster '$CLUSTER': 2 nodes x 2 slots, inter-node link shaped to $BANDWIDTH"
else
  HOSTS=(--hosts localhost:2 --layouts 1x1,1x2)
  PREDICT=1x4
  echo "NOTE: no emulated cluster (needs root and network namespaces): local layouts 1x1 and 1x2 only"
fi

echo "== 2. study: every debug model, throughput x ${STUDY_REPEATS} repeats (hvdbench/studies/demo.yaml)"
"$HVD" study run demo "${HOSTS[@]}" --repeats "$STUDY_REPEATS" --out "$RUN/study"

echo "== 3. sweep: ResNet-50 debug time-to-accuracy (top-1 0.95) x $REPEATS repeats"
[ -f "$OUT/digits/manifest.json" ] || "$HVD" prepare digits --out "$OUT/digits"
"$HVD" sweep resnet50 "${HOSTS[@]}" --repeats "$REPEATS" --timeout 300 --name demo-tta --out "$RUN/sweep-tta" \
    -- --framework torch --flavor debug --data "$OUT/digits"

echo "== 4. report"
"$HVD" report "$RUN/sweep-tta" "$RUN/study" --out "$RUN/report" --predict "$PREDICT"
echo "demo finished in $((SECONDS - t0))s; results: $RUN"
