#!/usr/bin/env bash
# The main job, on a fresh Debian machine: install what is missing, build,
# fetch MNIST, train LeNet-5 with W8A8 quantization-aware training, export
# the integer model (out/lenet-w8a8.qat.h5), evaluate it with the integer
# engine, and print float, fake-quant and integer accuracies side by side.
#   QAT_MNIST_DIR  a local copy of the MNIST .gz files (no download)
#   EPOCHS         training epochs (default 5)
#   MODEL          lenet (default), lenet-bn or mlp
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup-deps.sh
bash scripts/fetch-mnist.sh "$root/data/mnist"
echo "== build (Release) in build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
bin=./build/tools/qat/qat
# OpenBLAS 0.3.21 falls back to its generic Prescott kernels on CPUs newer
# than it knows, at half the float speed. Unless the caller chose a core
# type, take the better one qat names (and say so).
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then
  better=$($bin info --better-coretype)
  if [ -n "$better" ]; then
    echo "== OpenBLAS does not know this CPU: using OPENBLAS_CORETYPE=$better (set OPENBLAS_CORETYPE to override)"
    export OPENBLAS_CORETYPE=$better
  fi
fi
model=${MODEL:-lenet}
name=out/$model-w8a8
mkdir -p out
echo "== train $model, W8A8 QAT, ${EPOCHS:-5} epochs -> $name.ckpt.h5"
$bin train --model "$model" --epochs "${EPOCHS:-5}" --data data/mnist --qat --wbits 8 --abits 8 \
  --out "$name.ckpt.h5" --json | tail -1 > "$name.train.json"
echo "== export -> $name.qat.h5"
$bin export --checkpoint "$name.ckpt.h5" --out "$name.qat.h5" --json | tail -1 > "$name.export.json"
echo "== evaluate with the integer engine (and the fake-quantized model from the same file)"
$bin eval --model "$name.qat.h5" --data data/mnist --engine int --compare fake --json | tail -1 > "$name.eval.json"
# field NAME FILE: a number from a one-line JSON object
field() { sed -E "s/.*\"$1\": ([0-9.e+-]+).*/\1/" "$2"; }
pct() { awk -v v="$1" 'BEGIN { printf "%.2f %%", 100 * v }'; }
echo
echo "                       test accuracy"
echo "  float weights        $(pct "$(field test_accuracy_float_weights "$name.train.json")")   (the QAT weights, fake quantization off)"
echo "  fake-quantized       $(pct "$(field test_accuracy_fake_quant "$name.train.json")")   (the model QAT trained)"
echo "  integer engine       $(pct "$(field test_accuracy "$name.eval.json")")   ($(field infer_samples_per_s "$name.eval.json" | cut -d. -f1) samples/s, batch 64, 1 thread)"
echo "  int vs fake predictions agree on $(pct "$(field agreement "$name.eval.json")") of the test set"
echo "  quantized checkpoint: $name.qat.h5, $(field bytes "$name.export.json") bytes"
