#!/usr/bin/env bash
# Placeholder demo (issue 2): the stack report and a 2-process Horovod smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
"$BIN/hvdbench" env
"$BIN/horovodrun" -np 2 -H localhost:2 --gloo "$BIN/python" -m hvdbench.frameworks.smoke --expect-size 2
