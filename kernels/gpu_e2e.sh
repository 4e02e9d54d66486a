#!/usr/bin/env bash
# End-to-end check on one CUDA GPU (issue 6): Llama-2-7B and Llama-3-8B at full depth in
# bf16, batch 1, 8 and 32, prompts of 512 and 2048 tokens, 32 output tokens, eager and
# torch.compile. Steps are timed with CUDA events; the GPU's clocks are left as they are.
#
#   kernels/gpu_e2e.sh                 # from the repository root, on the GPU machine
#   PYTHON=/opt/torch/.venv/bin/python3 kernels/gpu_e2e.sh --repeats 3
#
# Needs torch with CUDA, numpy, pandas, pyyaml, typer and rich (ridgeline need not be
# installed: it runs from the checkout). Calibrated predictions use the profile of the GPU's
# key that 'ridgeline calibrate' wrote (user data folder, else reports/profiles).
# Results: <user data folder>/validation/e2e-cuda-<gpu>-<model>-<date>.json (one per model).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv || true
for model in llama-2-7b llama-3-8b; do
  for prompt in 512 2048; do
    "$PY" -m ridgeline.cli e2e "$model" --device cuda --dtype bf16 \
      --batch 1 --batch 8 --batch 32 --prompt "$prompt" --generate 32 --repeats 5 --compile "$@"
  done
done
