#!/usr/bin/env bash
# QAT training speed and memory of the graph reference models (models/*.qnet),
# qat vs PyTorch 1.13 eager QAT, side by side in one run: the same
# architectures (the PyTorch side reads the same .qnet files), batch 64, one
# thread, Adam, W8A8, real MNIST (SAMPLES of it).
#   bench/bench_graph_train.sh [BUILD_DIR] [DATA_DIR] [SAMPLES] [MODELS]
# MODELS: comma-separated names under models/ (default resnet8,ds-cnn,mobilenet-v1).
# PyTorch comes from Debian's python3-torch; without it the comparison is
# skipped with a message. Reports OPENBLAS_CORETYPE and the kernel family
# OpenBLAS actually chose on each side, samples/s and peak RSS. This
# machine's speed drifts from minute to minute: each side runs twice,
# alternating, and keeps its best.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-3200}
models=${4:-resnet8,ds-cnn,mobilenet-v1}
bin=$build/tools/qat/qat
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then env_core="(unset)"; else env_core="\"$OPENBLAS_CORETYPE\""; fi
echo "OPENBLAS_CORETYPE=$env_core  batch 64, 1 thread, $samples samples, Adam, W8A8 QAT"
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
field() { sed -nE "s/.*\"$1\": \"?([^,\"}]+)\"?.*/\1/p"; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
for model in ${models//,/ }; do
  file=$root/models/$model.qnet
  [ -f "$file" ] || { echo "bench: no model file $file" >&2; exit 1; }
  ours=0; theirs=0; rss=0; trss=0
  for round in 1 2; do
    # two epochs over the samples: qat reports the rate of the whole run, so
    # the first (warm-up) epoch is in it, as PyTorch's is not
    j=$("$bin" train --qat --wbits 8 --abits 8 --model-file "$file" --data "$data" --epochs 2 \
         --limit-train "$samples" --limit-test 1000 --json 2>/dev/null | tail -1)
    ours=$(max "$ours" "$(echo "$j" | field train_samples_per_s)")
    rss=$(max "$rss" "$(echo "$j" | field peak_rss_mib)"); core=$(echo "$j" | field blas_core)
    if [ $have_torch = 1 ]; then
      t=$(cd "$root/bench" && /usr/bin/python3 torch_graph_train.py "$file" "$data" 64 "$samples" qat)
      theirs=$(max "$theirs" "$(echo "$t" | field train_samples_per_s)")
      trss=$(max "$trss" "$(echo "$t" | field peak_rss_mib)"); tcore=$(echo "$t" | field blas_core)
    fi
  done
  line="$model: qat $ours samples/s, peak RSS $rss MiB (OpenBLAS core $core)"
  if [ $have_torch = 1 ]; then
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    line="$line; torch $theirs samples/s, peak RSS $trss MiB (OpenBLAS core $tcore); ratio ${ratio}x"
  fi
  echo "$line"
done
