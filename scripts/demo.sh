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
#      run (2x2 and 4x1 on the emulated cluster), its text into report.log;
#   5. the answer in a few lines (scripts/demo_answer.py) and the page to open.
# It says at the start how long it expects to take, and between the stages how long is left.
# Each demo writes a new directory under demo-out/ (the prepared data is shared and kept).
#
#   make demo                                  (or: bash scripts/demo.sh)
#   DEMO_LOCAL=1 DEMO_ONLY=ncf DEMO_REPEATS=1 DEMO_STUDY_REPEATS=1 bash scripts/demo.sh   # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.venv/bin"
HVD="$BIN/hvdbench"
OUT="${DEMO_OUT:-$PWD/demo-out}"
RUN="$OUT/$(date +%Y%m%d-%H%M%S)"
BANDWIDTH="${DEMO_BANDWIDTH:-100mbit}"
REPEATS="${DEMO_REPEATS:-2}"  # 3 took it past 10 minutes on 2 cores
STUDY_REPEATS="${DEMO_STUDY_REPEATS:-2}"
ONLY="${DEMO_ONLY:-}"  # a comma list of the study's models: only these (the time-to-accuracy sweep runs all the same)
CLUSTER=hvddemo
MODELS=7  # the demo study's models (hvdbench/studies/demo.yaml)
# The start's estimate: a run (a launch) and the report on a quiet 2-core machine, from the 9 min 51 s
# measured at a8973f3 (2026-11-29, nothing else running) for its 48 runs (9 min 42 s: 12 s a launch
# on average, 6-12 s for one rank, up to 24 s for 2x1 over the 100mbit link) and the report and answer
# (9 s); between the stages the time left is scaled by this demo's own pace.
RUN_S=12
REPORT_S=10
t0=$SECONDS

clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
elapsed() { clock $((SECONDS - t0)); }

if [ "$(id -u)" = 0 ] && [ -z "${DEMO_LOCAL:-}" ]; then LAYOUTS=3; else LAYOUTS=2; fi
models=$MODELS
[ -n "$ONLY" ] && models=$(($(tr -cd , <<<"$ONLY" | wc -c) + 1))
count_runs() {
  study_runs=$((models * LAYOUTS * STUDY_REPEATS))
  tta_runs=$((LAYOUTS * REPEATS))
  expect=$(((study_runs + tta_runs) * RUN_S + REPORT_S))
}
count_runs
echo "make demo: $study_runs throughput runs ($models models x $LAYOUTS layouts x $STUDY_REPEATS repeats), then" \
     "ResNet-50 to 0.95 top-1 x $LAYOUTS layouts x $REPEATS repeats, each run a launch of its own, then the report;"
echo "about $(clock $expect) on a quiet 2-core machine (9 min 51 s measured at a8973f3 on 2026-11-29)," \
     "longer where other work shares it."

echo "== 1. hosts"
if [ "$LAYOUTS" = 3 ] && "$HVD" cluster up --name "$CLUSTER" --nodes 2 --slots 2 \
      --bandwidth "$BANDWIDTH" --subnet 10.231.7.0/24; then
  trap '"$HVD" cluster down --name "$CLUSTER" >/dev/null' EXIT
  HOSTS=(--cluster "$CLUSTER" --layouts 1x1,1x2,2x1)
  PREDICT=2x2,4x1
  echo "emulated cluster '$CLUSTER': 2 nodes x 2 slots, inter-node link shaped to $BANDWIDTH"
else
  HOSTS=(--hosts localhost:2 --layouts 1x1,1x2)
  PREDICT=1x4
  echo "NOTE: no emulated cluster (it needs root and network namespaces; a line above says why where it failed):" \
       "local layouts 1x1 and 1x2 only"
  if [ "$LAYOUTS" = 3 ]; then  # the start's estimate counted the 2x1 runs
    LAYOUTS=2
    count_runs
    echo "so $study_runs throughput runs and $tta_runs time-to-accuracy runs, about $(clock $expect) on a quiet 2-core machine"
  fi
fi

echo "== 2. study: every debug model, throughput x ${STUDY_REPEATS} repeats (hvdbench/studies/demo.yaml) [$(elapsed)]"
"$HVD" study run demo "${HOSTS[@]}" --repeats "$STUDY_REPEATS" ${ONLY:+--only "$ONLY"} --out "$RUN/study"

# The rest at the study's pace: its runs took so long against RUN_S each.
took=$((SECONDS - t0))
left=$(((tta_runs * RUN_S + REPORT_S) * took / (study_runs * RUN_S > 0 ? study_runs * RUN_S : 1)))
echo "== 3. sweep: ResNet-50 debug time-to-accuracy (top-1 0.95) x $REPEATS repeats [$(elapsed); $study_runs of" \
     "$((study_runs + tta_runs)) runs done, about $(clock $left) left]"
[ -f "$OUT/digits/manifest.json" ] || "$HVD" prepare digits --out "$OUT/digits"
"$HVD" sweep resnet50 "${HOSTS[@]}" --repeats "$REPEATS" --timeout 300 --name demo-tta --out "$RUN/sweep-tta" \
    -- --framework torch --flavor debug --data "$OUT/digits"

echo "== 4. report [$(elapsed); every run done]: its whole text goes to $RUN/report.log"
"$HVD" report "$RUN/sweep-tta" "$RUN/study" --out "$RUN/report" --predict "$PREDICT" >"$RUN/report.log" 2>&1 \
  || { tail -n 20 "$RUN/report.log"; echo "the report failed: $RUN/report.log"; exit 1; }

echo "== the answer (the demo took $(elapsed); the report's whole text: $RUN/report.log)"
"$BIN/python" scripts/demo_answer.py "$RUN"
