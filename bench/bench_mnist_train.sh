#!/usr/bin/env bash
# Training speed, qat vs PyTorch 1.13, side by side in one run: same
# models, batch 64, one thread, Adam, real MNIST (SAMPLES of it). Float
# training, and with --qat W8A8 QAT against PyTorch's eager-mode QAT
# (prepare_qat, default QAT qconfig).
#   bench/bench_mnist_train.sh [--qat] [BUILD_DIR] [DATA_DIR] [SAMPLES]
# PyTorch comes from Debian's python3-torch; without it the comparison is
# skipped with a message. Reports OPENBLAS_CORETYPE with every figure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
qat=(); mode=float
if [ "${1:-}" = --qat ]; then qat=(--qat --wbits 8 --abits 8); mode=qat; shift; fi
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-20000}
bin=$build/examples/mnist/qat-mnist
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}  batch 64, 1 thread, $samples samples, Adam ${qat[*]:-float}"
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
for model in lenet mlp; do
  ours=$("$bin" train "${qat[@]}" --model "$model" --epochs 2 --limit-train "$samples" --limit-test 1000 --json 2>/dev/null \
         | tail -1 | sed -E 's/.*"train_samples_per_s": ([0-9.]+).*"peak_rss_mib": ([0-9.]+).*/\1 \2/')
  line="$model: qat $(echo "$ours" | cut -d' ' -f1) samples/s (peak RSS $(echo "$ours" | cut -d' ' -f2) MiB)"
  if [ $have_torch = 1 ]; then
    theirs=$(/usr/bin/python3 "$root/bench/torch_mnist_train.py" "$data" 64 "$samples" "$model" "$mode" \
             | sed -E 's/.*"train_samples_per_s": ([0-9.]+).*/\1/')
    ratio=$(awk -v a="$(echo "$ours" | cut -d' ' -f1)" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    line="$line, torch $theirs samples/s, ratio ${ratio}x"
  fi
  echo "$line"
done
