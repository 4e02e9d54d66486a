#!/usr/bin/env bash
# GPU step 2 of 3 (one command, under 10 minutes on an H100): after gpu_calibrate.sh, with its
# archive unpacked into the checkout (the profile reports/profiles/<key>.yaml):
#
# 1. `ridgeline e2e` for Llama-3-8B (batch 1, 8, 64 x prompt 512, 4096) and Llama-2-7B
#    (batch 1, 8, 16 x prompt 512, 4096: its 32 K/V heads hold 4x Llama-3-8B's cache), bf16,
#    32 output tokens, decode eager and captured in CUDA graphs (rows written one by one);
# 2. `ridgeline validate` on the GPU case set, device time; headline and reference kernels
#    apart (python -m kernels.cases_gpu summary).
#
#   bash kernels/gpu_validate.sh
#   DEVICE=cpu bash kernels/gpu_validate.sh   # dry run on a CPU: tiny shapes, results in $OUT
DEVICE=${DEVICE:-cuda}
source "$(dirname "$0")/gpu_common.sh"
E2E="--generate 32 --repeats 3 --dtype bf16 --prompt 512 --prompt 4096 --execution eager --execution graph"
if [ "$DEVICE" = cuda ]; then
  FOLDER=reports/validation
  [ -f "reports/profiles/$KEY.yaml" ] || echo "no profile reports/profiles/$KEY.yaml: calibrated predictions stay empty (unpack gpu_calibrate.sh's archive first)"
  step 170 $PY -m ridgeline.cli e2e llama-3-8b --device cuda $E2E --batch 1 --batch 8 --batch 64
  step 200 $PY -m kernels.cases_gpu validate --device cuda
  step 150 $PY -m ridgeline.cli e2e llama-2-7b --device cuda $E2E --batch 1 --batch 8 --batch 16
else  # dry run: one layer, tiny prompts, one thread, the dry-run profile of gpu_calibrate.sh
  FOLDER=$OUTDIR
  step 120 $PY -m ridgeline.cli e2e qwen2-0.5b --device cpu --layers 1 --generate 3 --repeats 1 \
      --dtype fp32 --batch 1 --prompt 16 --execution eager --output "$OUTDIR/e2e-$KEY.json"
  step 300 $PY -m kernels.cases_gpu validate --device cpu --threads 1 --profile "$OUTDIR/$KEY.yaml" \
      --output-dir "$OUTDIR"
fi
for snap in "$FOLDER"/"$KEY"-*.json; do
  [ -f "$snap" ] && $PY -m kernels.cases_gpu summary "$snap"
done
pack "$FOLDER"/"$KEY"-*.json "$FOLDER"/"$KEY"-*.csv "$FOLDER"/e2e-"$KEY"*.json
exit $status
