# Sourced by kernels/gpu_calibrate.sh, gpu_validate.sh and gpu_h200.sh: the environment, a
# log under $OUT (or /tmp), the GPU's state before and after (read, never set), and a time
# budget: each step runs under `timeout` with what is left of BUDGET_S, so the whole command
# ends inside the device tool's 10 minutes and keeps what it measured so far.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-500}   # three commands + two machine starts fit a 30-minute session
OUTDIR=${OUT:-/tmp/ridgeline-gpu}
[ "${DEVICE:-cuda}" = cpu ] && export OMP_NUM_THREADS=1   # dry run: one thread, key ...-1t
mkdir -p "$OUTDIR"
status=0
exec > >(tee -a "$OUTDIR/ridgeline-gpu.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv 2>/dev/null || echo "nvidia-smi: not available"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
KEY=$($PY -c "from kernels.e2e import measured_key, resolve_device as r; print(measured_key(r('${DEVICE:-cuda}')))") || exit 2
echo "device key: $KEY"

# step SECONDS_AT_MOST COMMAND...: run under what is left of the budget (and at most the
# given seconds); a step that times out or fails sets $status and the script goes on
step() {
  local most=$1; shift
  local left=$((BUDGET_S - SECONDS))
  [ "$most" -lt "$left" ] && left=$most
  if [ "$left" -le 5 ]; then echo "SKIPPED (budget spent): $*"; status=1; return; fi
  echo "== [$SECONDS s] $* (up to $left s)"
  timeout --signal=INT --kill-after=10 "$left" "$@" || { local rc=$?; echo "step exited $rc: $*"; status=$rc; }
}

# pack FILES...: what the device tool returns (at most 8 files): one archive of the results
pack() {
  local files
  files=$(ls "$@" 2>/dev/null)
  [ -n "$files" ] && tar czf "$OUTDIR/ridgeline-results-$KEY.tar.gz" $files
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>/dev/null || true
  date -u
  ls -la "$OUTDIR"
}
