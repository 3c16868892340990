#!/usr/bin/env bash
# The main job: install what is missing, build, fetch MNIST, train LeNet-5
# with W8A8 quantization-aware training. (Export and the integer engine
# join this script as they land; see README "Status".)
#   QAT_MNIST_DIR  a local copy of the MNIST .gz files (no download)
#   EPOCHS         training epochs (default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup-deps.sh
bash scripts/fetch-mnist.sh "$root/data/mnist"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
mkdir -p out
./build/examples/mnist/qat-mnist train --model lenet --epochs "${EPOCHS:-5}" --data data/mnist \
  --qat --wbits 8 --abits 8 --json \
  | tee out/train.json
