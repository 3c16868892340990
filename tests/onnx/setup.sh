#!/usr/bin/env bash
# Installs onnxruntime-node (the version tests/onnx/package.json pins) into
# tests/onnx/node_modules, for the ONNX comparisons. --ignore-scripts: the
# package's install script downloads extra binaries (CUDA, TensorRT) from
# a host this machine may not reach; the CPU library is in the package.
# Exit 77 when node or npm is missing (the callers skip), 1 when npm fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "tests/onnx/setup.sh: node and npm are needed for onnxruntime-node" >&2
  exit 77
fi
if [ -d "$here/node_modules/onnxruntime-node" ] &&
   node -e "require('$here/node_modules/onnxruntime-node')" 2>/dev/null; then
  exit 0
fi
echo "tests/onnx/setup.sh: npm install --ignore-scripts onnxruntime-node (into tests/onnx/node_modules)" >&2
cd "$here"
npm install --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
node -e "require('$here/node_modules/onnxruntime-node')"
