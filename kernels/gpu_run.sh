#!/usr/bin/env bash
# One command on an NVIDIA GPU machine: calibrate + validate (+ the end-to-end decoder runs
# of kernels/gpu_e2e.sh with E2E=1), then copy everything to "$OUT" when it is set.
# (The GPU case set, host terms, graph-mode e2e, transformers and a second GPU are in
# kernels/gpu_calibrate.sh, gpu_validate.sh and gpu_h200.sh: three commands of under 10 minutes.)
#
#   bash kernels/gpu_run.sh            # full suite
#   QUICK=--quick bash kernels/gpu_run.sh
#   E2E=1 bash kernels/gpu_run.sh      # also the end-to-end runs (they take longer)
#
# Needs torch with CUDA, numpy, pandas, pyyaml, typer, rich (and plotly for the HTML report;
# without it the JSON/CSV are written and 'python -m kernels.html SNAPSHOT.json' renders the
# HTML later on any machine). Never changes clocks or other GPU settings.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# results go to the user data folder (reports/ holds committed baselines): one for this run
export RIDGELINE_HOME=${RIDGELINE_HOME:-$PWD/gpu-results}
PY=${PYTHON:-python3}
QUICK=${QUICK:-}
LOG=${OUT:-/tmp}/ridgeline-gpu.log
status=0
exec > >(tee "$LOG") 2>&1   # everything below is logged; $status survives (no subshell)
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
$PY -m ridgeline.cli calibrate --device cuda $QUICK || status=$?
$PY -m ridgeline.cli validate --device cuda $QUICK || status=$?
if [ -n "${E2E:-}" ] && [ -f kernels/gpu_e2e.sh ]; then  # the end-to-end decoder runs (long)
  PYTHON=$PY bash kernels/gpu_e2e.sh || status=$?
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true
date -u
if [ -n "${OUT:-}" ]; then
  # the device tool returns at most 8 files: one archive of every profile and snapshot made
  tar czf "$OUT/ridgeline-gpu-results.tar.gz" -C "$RIDGELINE_HOME" $(cd "$RIDGELINE_HOME" && ls \
      profiles/cuda-* validation/cuda-* validation/e2e-cuda-* 2>/dev/null)
  cp "$RIDGELINE_HOME"/validation/cuda-*.json "$OUT/" 2>/dev/null || true
  ls -la "$OUT"
fi
exit $status
