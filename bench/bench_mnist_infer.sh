#!/usr/bin/env bash
# Int8 inference speed, qat's engines vs PyTorch 1.13's converted int8
# models (eager-mode post-training quantization, qnnpack and onednn),
# side by side in one run: same models, batch 64, one thread, the real
# MNIST test set, the best of three passes on each side, each side run
# twice in alternation. Speed does not depend on the weights, so the qat
# models come from a short W8A8 QAT run on 1280 samples.
#   bench/bench_mnist_infer.sh [BUILD_DIR] [DATA_DIR] [SAMPLES]
# PyTorch comes from Debian's python3-torch; without it the comparison is
# skipped with a message. Reports OPENBLAS_CORETYPE and the integer kernel.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-10000}
bin=$build/tools/qat/qat
[ -x "$bin" ] && [ -x "$build/bench/bench_infer" ] || { echo "bench: build first" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
for model in lenet mlp; do
  "$bin" train --model $model --epochs 1 --limit-train 1280 --limit-test 100 --data "$data" --qat \
    --out "$tmp/$model.ckpt.h5" >/dev/null 2>&1
  "$bin" export --checkpoint "$tmp/$model.ckpt.h5" --out "$tmp/$model.qat.h5" >/dev/null 2>&1
done
# This machine's speed drifts from minute to minute: each side runs twice,
# alternating (qat, torch, qat, torch), and each keeps its best.
best() { sort -g | tail -1; }
for model in lenet mlp; do
  echo "== $model"
  "$build/bench/bench_infer" "$tmp/$model.qat.h5" 64 "$samples" "$data" | head -1 | sed 's/^/  /'
  ours=(); theirs_q=(); theirs_o=()
  for round in 1 2; do
    out=$("$build/bench/bench_infer" "$tmp/$model.qat.h5" 64 "$samples" "$data")
    ours+=("$(echo "$out" | awk '$1 == "int" { print $2 }')")
    hy=$(echo "$out" | awk '$1 == "hybrid" { print $2 }'); fk=$(echo "$out" | awk '$1 == "fake" { print $2 }')
    if [ $have_torch = 1 ]; then
      t=$(/usr/bin/python3 "$root/bench/torch_mnist_infer.py" "$data" 64 "$samples" "$model" qnnpack,onednn 2>/dev/null)
      theirs_q+=("$(echo "$t" | sed -nE 's/.*"backend": "qnnpack".*"infer_samples_per_s": ([0-9.]+).*/\1/p')")
      theirs_o+=("$(echo "$t" | sed -nE 's/.*"backend": "onednn".*"infer_samples_per_s": ([0-9.]+).*/\1/p')")
    fi
  done
  q=$(printf '%s\n' "${ours[@]}" | best)
  echo "  qat int engine      $q samples/s   (hybrid $hy, fake $fk in the last round)"
  if [ $have_torch = 1 ]; then
    for b in qnnpack onednn; do
      if [ $b = qnnpack ]; then v=$(printf '%s\n' "${theirs_q[@]}" | best); else v=$(printf '%s\n' "${theirs_o[@]}" | best); fi
      echo "  torch int8 ($b)  $v samples/s   qat/torch $(awk -v a="$q" -v b="$v" 'BEGIN { printf "%.2f", a / b }')x"
    done
  fi
done
