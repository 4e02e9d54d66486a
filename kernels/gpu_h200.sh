#!/usr/bin/env bash
# GPU step 3 of 3 (one command, under 10 minutes on an H200; the H100's profile from step 1
# in the checkout): the second GPU.
#
# 1. calibrate on the H200 (the GPU case set, quick) and its host terms;
# 2. validate there (quick), and e2e for Llama-3-8B, decode eager and in CUDA graphs;
# 3. predict the H200's measured kernels and e2e rows from the H100 profile transferred
#    (its fractions on the H200's datasheet roofs; kernels/gpu_transfer.py), per class and
#    end to end -> reports/validation/transfer-<h100 profile>-to-<h200 snapshot>.json
#    (needs the engine's profile transfer, ridgeline.profile.profile_ceilings(transfer=True)).
#
#   bash kernels/gpu_h200.sh                         # on the nvidia-h200 machine
#   SOURCE=reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml bash kernels/gpu_h200.sh
DEVICE=${DEVICE:-cuda}
source "$(dirname "$0")/gpu_common.sh"
SOURCE=${SOURCE:-reports/profiles/cuda-nvidia-h100-80gb-hbm3.yaml}
E2E="--generate 32 --repeats 3 --dtype bf16"
if [ "$DEVICE" = cuda ]; then
  FOLDER=reports/validation; PROFILE="reports/profiles/$KEY.yaml"
  step 200 $PY -m kernels.cases_gpu calibrate --device cuda --quick
  step 60 $PY -m kernels.host_profile llama-3-8b --device cuda --layers 4 --prompt 512 --steps 16 \
      --profile "$PROFILE"
  step 150 $PY -m kernels.cases_gpu validate --device cuda --quick
  step 90 $PY -m ridgeline.cli e2e llama-3-8b --device cuda $E2E --batch 1 --batch 8 --batch 64 \
      --prompt 512 --execution eager --execution graph
else  # dry run: reuse what gpu_calibrate.sh / gpu_validate.sh left in $OUT
  FOLDER=$OUTDIR; PROFILE="$OUTDIR/$KEY.yaml"
  SOURCE=${SOURCE_DRY:-$PROFILE}
fi
SNAP=$(ls -t "$FOLDER"/"$KEY"-*.json 2>/dev/null | head -1)
if [ -n "$SNAP" ] && [ -f "$SOURCE" ]; then
  step 60 $PY -m kernels.gpu_transfer "$SNAP" "$SOURCE" \
      $(for f in "$FOLDER"/e2e-"$KEY"*.json; do [ -f "$f" ] && echo --e2e "$f"; done) \
      --output "$FOLDER/transfer-$(basename "${SOURCE%.yaml}")-to-$(basename "${SNAP%.json}").json"
else
  echo "no snapshot of $KEY or no source profile $SOURCE: transfer skipped"; status=1
fi
pack "$PROFILE" "${PROFILE%.yaml}.calibration.csv" "$FOLDER"/"$KEY"-*.json "$FOLDER"/"$KEY"-*.csv \
     "$FOLDER"/e2e-"$KEY"*.json "$FOLDER"/transfer-*"$KEY"*.json
exit $status
