#!/usr/bin/env bash
# GPU step 1 of 3 (one command, under 10 minutes on an H100): a device-time profile.
#
#   bash kernels/gpu_calibrate.sh              # on the GPU machine, from the checkout
#   QUICK=--quick bash kernels/gpu_calibrate.sh
#   DEVICE=cpu bash kernels/gpu_calibrate.sh   # dry run of the plumbing on a CPU (tiny
#                                              # shapes, results only under $OUT or /tmp)
#
# 1. `ridgeline calibrate` on the GPU case set (kernels/cases_gpu.py), every kernel timed
#    from the device's side (CUDA-graph replay minus launch gaps; profiler where a graph
#    cannot capture it), host cost and kernels per call kept per row;
# 2. the host terms (kernels/host_profile.py): launch gap in a graph, eager and compiled
#    host dispatch per engine op, kernels per op, merged into the profile;
# 3. the outside client with that profile: transformers generate (static cache) for
#    Llama-3-8B, eager at batch 1 and 8 and compiled (CUDA graphs) at batch 1, prompt 512,
#    and Qwen2-7B eager at batch 1;
# 4. graph replay against profiler kernel durations on a sample of cases (agreement).
# Writes reports/profiles/<key>.yaml (+ .calibration.csv), reports/validation/hf-<key>-*.json
# and agreement-<key>-<date>.json; $OUT gets one archive of them and the log. Unpack it into
# the checkout (tar xzf) before gpu_validate.sh, which predicts with that profile.
DEVICE=${DEVICE:-cuda}
source "$(dirname "$0")/gpu_common.sh"
QUICK=${QUICK:-}
HF="--generate 32 --repeats 3 --prompt 512"
if [ "$DEVICE" = cuda ]; then
  PROFILE="reports/profiles/$KEY.yaml"; FOLDER=reports/validation
  step 300 $PY -m kernels.cases_gpu calibrate --device cuda $QUICK
  step 70 $PY -m kernels.host_profile llama-3-8b --device cuda --layers 4 --batch 1 --prompt 512 \
      --steps 16 --profile "$PROFILE"
  step 45 $PY -m kernels.hf_client llama-3-8b --device cuda $HF --batch 1 --batch 8 --mode eager
  step 110 $PY -m kernels.hf_client llama-3-8b --device cuda $HF --batch 1 --mode compiled
  step 30 $PY -m kernels.hf_client qwen2-7b --device cuda $HF --batch 1 --mode eager
else  # dry run: tiny shapes; a CPU keeps its dispatch in overhead_us, so terms are not merged
  PROFILE="$OUTDIR/$KEY.yaml"; FOLDER=$OUTDIR
  step 300 $PY -m kernels.cases_gpu calibrate --device cpu --threads 1 --output "$PROFILE"
  step 120 $PY -m kernels.host_profile qwen2-0.5b --device cpu --layers 1 --prompt 32 --steps 2 \
      --no-compile --output "$OUTDIR/host-terms-$KEY.yaml"
  step 120 $PY -m kernels.hf_client qwen2-0.5b --device cpu --layers 1 --generate 3 --repeats 1 \
      --dtype fp32 --batch 1 --prompt 16 --mode eager --output "$OUTDIR/hf-$KEY.json"
fi
step 40 $PY -m kernels.cases_gpu agree --device "$DEVICE" --every "${AGREE_EVERY:-20}" \
    --output-dir "$FOLDER"
pack "$PROFILE" "${PROFILE%.yaml}.calibration.csv" "$FOLDER"/agreement-"$KEY"-*.json \
     "$FOLDER"/hf-"$KEY"*.json
exit $status
