#!/usr/bin/env bash
# One command for a 15-minute GPU lease (under 9 minutes on an H100 or H200): a device-time
# profile, a fresh held-out draw, and the serving check against transformers on the GPU.
#
#   bash kernels/gpu_session.sh                 # on the GPU machine, from the checkout
#   SEEDS="1126 1127" RATES="8 16" CAL= bash kernels/gpu_session.sh   # CAL= : the full GPU set
#   RATES= bash kernels/gpu_session.sh          # no serving check
#   DEVICE=cpu bash kernels/gpu_session.sh      # dry run of the plumbing on a CPU (tiny
#                                               # shapes, results only under $OUT or /tmp)
#
# 1. `calibrate --quick` (CAL; empty: the full set) on the GPU case set (kernels/cases_gpu.py), device time
#    -> reports/profiles/<key>.yaml (+ .calibration.csv);
# 2. `validate --draw SEED` on it, for each of SEEDS: models, batches, lengths and widths the GPU calibration
#    never used (kernels.cases_gpu.gpu_drawn_cases) -> reports/validation/<key>-<date>-draw<SEED>.*;
# 3. the host terms of eager decode (kernels.host_profile, no torch.compile), merged into
#    the profile;
# 4. `simulate-check --device cuda`: transformers' continuous batching, eager, Qwen2-0.5B in
#    bf16, a Poisson trace at each of RATES; every rate after the first is also simulated
#    with the host terms fitted to the first (--overhead-from) -> reports/validation/serving/.
# $OUT gets one archive of them and the log: unpack it into the checkout (tar xzf).
DEVICE=${DEVICE:-cuda}
source "$(dirname "$0")/gpu_common.sh"
SEEDS=${SEEDS:-1126}
RATES=${RATES-8 16}
CAL=${CAL---quick}
if [ "$DEVICE" = cuda ]; then
  PROFILE="reports/profiles/$KEY.yaml"; FOLDER=reports/validation; SERVING=$FOLDER/serving
  HOST="qwen2-0.5b --device cuda --layers 4 --batch 1 --prompt 512 --steps 16"
  SERVE="qwen2-0.5b --device cuda --dtype bf16 --requests 64 --repeats 3"
else  # dry run: one thread, the dry GPU set, one layer, a short trace
  PROFILE="$OUTDIR/$KEY.yaml"; FOLDER=$OUTDIR; SERVING=$OUTDIR
  HOST="qwen2-0.5b --device cpu --layers 1 --prompt 32 --steps 2"
  SERVE="qwen2-0.5b --device cpu --layers 1 --dtype fp32 --requests 6 --repeats 1 --output-range 4 8"
fi
THREADS=$([ "$DEVICE" = cpu ] && echo "--threads 1")
step 240 $PY -m kernels.cases_gpu calibrate --device "$DEVICE" $THREADS $CAL --output "$PROFILE"
for seed in $SEEDS; do
  step 170 $PY -m kernels.cases_gpu validate --device "$DEVICE" $THREADS --draw "$seed" \
      --profile "$PROFILE" --output-dir "$FOLDER"
done
if [ "$DEVICE" = cuda ]; then
  step 50 $PY -m kernels.host_profile $HOST --no-compile --profile "$PROFILE"
else
  step 50 $PY -m kernels.host_profile $HOST --no-compile --output "$OUTDIR/host-terms-$KEY.yaml"
fi
mkdir -p "$SERVING"
FIRST=
for rate in $RATES; do
  out="$SERVING/serving-$KEY-qwen2-0.5b-${rate}rps-$(date -u +%F).json"
  step 90 $PY -m ridgeline.cli simulate-check $SERVE --rate "$rate" --profile "$PROFILE" \
      ${FIRST:+--overhead-from "$FIRST"} --output "$out"
  [ -z "$FIRST" ] && [ -f "$out" ] && FIRST=$out
done
DRAWS=$(for seed in $SEEDS; do ls "$FOLDER"/"$KEY"-*draw"$seed".{json,csv} 2>/dev/null; done)
for snap in $DRAWS; do
  case $snap in *.json) $PY -m kernels.cases_gpu summary "$snap";; esac
done
pack "$PROFILE" "${PROFILE%.yaml}.calibration.csv" $DRAWS \
     "$SERVING"/serving-"$KEY"-*.json "$OUTDIR"/host-terms-"$KEY".yaml
exit $status
