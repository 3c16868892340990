#!/usr/bin/env bash
# The whole test suite: installs what is missing, fetches MNIST (the
# end-to-end tests train on a slice of it), builds with -Werror and runs
# every CUnit suite through ctest.
#   QAT_SANITIZE=1   build and test with ASan + UBSan (in build-asan/)
#   QAT_MNIST_DIR    a local copy of the four MNIST .gz files (no download)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
QAT_WITH_PYTHON=1 bash scripts/setup-deps.sh
bash scripts/setup-python.sh   # onnxruntime from PyPI, in .venv/
bash scripts/fetch-mnist.sh "$root/data/mnist"
if [ "${QAT_SANITIZE:-0}" = 1 ]; then
  dir=build-asan; flags=(-DQAT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
else
  dir=build; flags=(-DCMAKE_BUILD_TYPE=Release)
fi
cmake -S . -B "$dir" -DQAT_WERROR=ON "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)"
