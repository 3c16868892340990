#!/usr/bin/env bash
# Training speed, qat vs PyTorch 1.13, side by side in one run: same
# models, batch 64, one thread, Adam, real MNIST (SAMPLES of it). Float
# training, and with --qat W8A8 QAT against PyTorch's eager-mode QAT
# (prepare_qat, default QAT qconfig).
#   bench/bench_mnist_train.sh [--qat] [BUILD_DIR] [DATA_DIR] [SAMPLES]
# PyTorch comes from Debian's python3-torch; without it the comparison is
# skipped with a message. Reports OPENBLAS_CORETYPE and the kernel family
# OpenBLAS actually chose on each side. This machine's speed drifts from
# minute to minute: each side runs twice, alternating, and keeps its best.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
qat=(); mode=float
if [ "${1:-}" = --qat ]; then qat=(--qat --wbits 8 --abits 8); mode=qat; shift; fi
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-20000}
bin=$build/tools/qat/qat
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then env_core="(unset)"; else env_core="\"$OPENBLAS_CORETYPE\""; fi
echo "OPENBLAS_CORETYPE=$env_core  batch 64, 1 thread, $samples samples, Adam ${qat[*]:-float}"
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
field() { sed -nE "s/.*\"$1\": \"?([^,\"}]+)\"?.*/\1/p"; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
for model in lenet mlp; do
  ours=0; theirs=0
  for round in 1 2; do
    j=$("$bin" train "${qat[@]}" --model "$model" --epochs 2 --limit-train "$samples" --limit-test 1000 --json 2>/dev/null | tail -1)
    ours=$(max "$ours" "$(echo "$j" | field train_samples_per_s)")
    rss=$(echo "$j" | field peak_rss_mib); core=$(echo "$j" | field blas_core)
    if [ $have_torch = 1 ]; then
      t=$(/usr/bin/python3 "$root/bench/torch_mnist_train.py" "$data" 64 "$samples" "$model" "$mode")
      theirs=$(max "$theirs" "$(echo "$t" | field train_samples_per_s)")
      tcore=$(echo "$t" | field blas_core)
    fi
  done
  line="$model: qat $ours samples/s (peak RSS $rss MiB, OpenBLAS core $core)"
  if [ $have_torch = 1 ]; then
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    line="$line, torch $theirs samples/s (OpenBLAS core $tcore), ratio ${ratio}x"
  fi
  echo "$line"
done
