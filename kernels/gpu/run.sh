#!/usr/bin/env bash
# The one GPU run (kernels/gpu/run.py says what it does): bash kernels/gpu/run.sh OUT
#   SIZES=gpu (default) | gpu-heldout | gpu-families | gpu-heldout2 | gpu-heldout3 | cpu-test     STAGES=a,b (only those)     ORDER=auto|profiled|unprofiled
# Writes only into OUT: results.tar.gz (every finished stage), manifest.json, run.log.
set -uo pipefail
OUT=${1:?usage: bash kernels/gpu/run.sh OUT}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ "${SIZES:-gpu}" = cpu-test ] && export OMP_NUM_THREADS=1
exec "${PYTHON:-python3}" -m kernels.gpu.run "$OUT"
