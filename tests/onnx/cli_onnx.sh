#!/usr/bin/env bash
# qat export --onnx: writes the file (and --json names it); a float
# checkpoint and a model ONNX cannot express (sub-channel weights) are
# refused with a clear message, and neither file is written.
#
#   cli_onnx.sh QAT_BIN MNIST_DIR
set -euo pipefail
bin=$1 data=$2
work=$(mktemp -d /tmp/qat-cli-onnx-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
train() { "$bin" train --epochs 1 --limit-train 256 --limit-test 100 --data "$data" "$@" >/dev/null 2>&1; }

train --model lenet --qat --out "$work/qat.ckpt.h5"
"$bin" export --checkpoint "$work/qat.ckpt.h5" --onnx "$work/m.onnx" --json > "$work/out.json" 2>/dev/null
[ -s "$work/m.onnx" ] || fail "--onnx wrote nothing"
grep -q '"onnx": "'"$work"'/m.onnx"' "$work/out.json" || fail "--json does not name the ONNX file: $(cat "$work/out.json")"
grep -q '"out": null' "$work/out.json" || fail "--json: out should be null without --out"
if ls "$work"/*.qat.h5 >/dev/null 2>&1; then fail "--onnx alone wrote a .qat.h5"; fi

# a float checkpoint: refused, no file
train --model lenet --out "$work/float.ckpt.h5"
if "$bin" export --checkpoint "$work/float.ckpt.h5" --onnx "$work/f.onnx" 2>"$work/err"; then fail "float checkpoint exported"; fi
grep -q "float checkpoint" "$work/err" || fail "message: $(cat "$work/err")"
if [ -e "$work/f.onnx" ]; then fail "a float checkpoint left $work/f.onnx"; fi

# sub-channel weights: refused by layer name before either file is written
train --model mlp --qat --granularity block:16 --out "$work/block.ckpt.h5"
if "$bin" export --checkpoint "$work/block.ckpt.h5" --onnx "$work/b.onnx" --out "$work/b.qat.h5" 2>"$work/err"; then
  fail "sub-channel weights exported"
fi
grep -q "layer fc1: sub-channel" "$work/err" || fail "message: $(cat "$work/err")"
if [ -e "$work/b.onnx" ] || [ -e "$work/b.qat.h5" ]; then fail "a refused export left a file"; fi
if ls -a "$work" | grep -q qat-tmp; then fail "a temporary file was left"; fi

# --onnx onto the checkpoint itself: a usage error, nothing replaced
if "$bin" export --checkpoint "$work/qat.ckpt.h5" --onnx "$work/qat.ckpt.h5" 2>/dev/null; then fail "overwrote the checkpoint"; fi
echo "qat export --onnx: ok"
