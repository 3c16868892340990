#!/usr/bin/env bash
# Integer inference with sub-channel weights side by side with per-channel
# weights (docs/subchannel.md, "Speed"): MLP and LeNet-5 at W4A8, trained
# briefly with --granularity channel and with --granularity block:16 (speed
# does not depend on the weights), the int engine on both files in
# alternation (best of each), then each sub-channel op's kernel alone with
# and without its block conversions, against the per-channel GEMM.
#   bench/bench_subchannel.sh [BUILD_DIR] [DATA_DIR] [SAMPLES]
# Reports OPENBLAS_CORETYPE and the integer kernels. Keep the machine
# otherwise idle: timings here drift by a third from run to run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-10000}
bin=$build/tools/qat/qat
[ -x "$bin" ] && [ -x "$build/bench/bench_subchannel" ] || { echo "bench: build first" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for model in mlp lenet; do
  for g in channel block:16; do
    n=$model-${g/:/}
    "$bin" train --model $model --epochs 1 --limit-train 1280 --limit-test 100 --data "$data" --qat --wbits 4 \
      --abits 8 --granularity $g --out "$tmp/$n.ckpt.h5" >/dev/null 2>&1
    "$bin" export --checkpoint "$tmp/$n.ckpt.h5" --out "$tmp/$n.qat.h5" >/dev/null 2>&1
  done
  echo "== $model W4A8"
  "$build/bench/bench_subchannel" "$tmp/$model-channel.qat.h5" "$tmp/$model-block16.qat.h5" 64 "$samples" "$data" 3 |
    sed "s|$tmp/||g"
done
