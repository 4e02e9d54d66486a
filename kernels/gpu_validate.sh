#!/usr/bin/env bash
# GPU step 2 of 3 (one command, under 10 minutes on an H100; after gpu_calibrate.sh, with its
# profile reports/profiles/<key>.yaml in the checkout):
#
# 1. `ridgeline validate` on the GPU case set, device time; headline and reference kernels
#    apart (python -m kernels.cases_gpu summary);
# 2. `ridgeline e2e` for Llama-2-7B and Llama-3-8B, bf16, 32 output tokens, decode eager and
#    captured in CUDA graphs: batch 1 and 8 at prompts 512 and 4096, batch 32 and 64 at 512
#    (Llama-2-7B's 32 K/V heads hold 4x Llama-3-8B's cache: batch 64 x 4096 does not fit);
# 3. the outside client, transformers generate with a static cache: eager at batch 1 and 8,
#    its compiled (CUDA-graph) decode at batch 1, prompt 512.
#
#   bash kernels/gpu_validate.sh
#   DEVICE=cpu bash kernels/gpu_validate.sh   # dry run on a CPU: tiny shapes, results in $OUT
DEVICE=${DEVICE:-cuda}
source "$(dirname "$0")/gpu_common.sh"
E2E="--generate 32 --repeats 3 --dtype bf16"
if [ "$DEVICE" = cuda ]; then
  FOLDER=reports/validation; PROFILE="reports/profiles/$KEY.yaml"
  step 260 $PY -m kernels.cases_gpu validate --device cuda
  for model in llama-3-8b llama-2-7b; do
    step 110 $PY -m ridgeline.cli e2e "$model" --device cuda $E2E --batch 1 --batch 8 \
        --prompt 512 --prompt 4096 --execution eager --execution graph
    step 60 $PY -m ridgeline.cli e2e "$model" --device cuda $E2E --batch 32 --batch 64 \
        --prompt 512 --execution eager --execution graph
  done
  step 60 $PY -m kernels.hf_client llama-3-8b --device cuda $E2E --batch 1 --batch 8 --prompt 512 \
      --mode eager
  step 120 $PY -m kernels.hf_client llama-3-8b --device cuda $E2E --batch 1 --prompt 512 \
      --mode compiled
  step 40 $PY -m kernels.hf_client llama-2-7b --device cuda $E2E --batch 1 --prompt 512 --mode eager
else  # dry run: a few layers, tiny prompts, 1 thread, the dry-run profile of gpu_calibrate.sh
  FOLDER=$OUTDIR; PROFILE="$OUTDIR/$KEY.yaml"
  E2E="--generate 3 --repeats 1 --dtype fp32"
  step 300 $PY -m kernels.cases_gpu validate --device cpu --threads 1 --profile "$PROFILE" \
      --output-dir "$OUTDIR"
  step 120 $PY -m ridgeline.cli e2e qwen2-0.5b --device cpu --layers 1 $E2E --batch 1 --prompt 16 \
      --execution eager --output "$OUTDIR/e2e-$KEY.json"
  step 120 $PY -m kernels.hf_client qwen2-0.5b --device cpu --layers 1 $E2E --batch 1 --prompt 16 \
      --mode eager --output "$OUTDIR/hf-$KEY.json"
fi
for snap in "$FOLDER"/"$KEY"-*.json; do
  [ -f "$snap" ] && $PY -m kernels.cases_gpu summary "$snap"
done
pack "$FOLDER"/"$KEY"-*.json "$FOLDER"/"$KEY"-*.csv "$FOLDER"/e2e-"$KEY"*.json "$FOLDER"/hf-"$KEY"*.json
exit $status
