#!/usr/bin/env bash
# The figures of docs/subchannel.md "Measured": MLP and LeNet-5 at W4A8
# per channel and --granularity block:16, and the MLP at W8A8 per channel,
# 5 epochs, seed 1; then for each: fake-quant and integer accuracy, their
# agreement, the hybrid engine, the numpy reader against the integer
# engine on the whole test set, and the file sizes with a breakdown of
# the MLP block:16 file; the block:16 runs also with compact block
# scales (--block-scales u4, u8).
#   bench/subchannel_bars.sh [BUILD_DIR] [DATA_DIR] [OUT_DIR]
# OUT_DIR keeps the checkpoints and files (default a temporary directory);
# a checkpoint already there is not trained again. Training takes a few
# minutes per model on one core; everything runs with one thread.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; out=${3:-}
bin=$build/tools/qat/qat; ref=$build/tests/codegen_ref
[ -x "$bin" ] && [ -x "$ref" ] || { echo "subchannel_bars: build first ($bin, $ref)" >&2; exit 1; }
/usr/bin/python3 -c "import h5py, numpy" 2>/dev/null || { echo "subchannel_bars: needs python3-h5py, python3-numpy" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
runs="mlp:4:channel mlp:4:block:16 mlp:4:block:16:u4 mlp:4:block:16:u8 lenet:4:channel lenet:4:block:16 lenet:4:block:16:u4 mlp:8:channel"
name() { echo "$1_w$2a8_${3/:/}${4:+_$4}"; }  # model bits granularity [block scales]
json() { /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d$1)"; }
echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE; $("$bin" info 2>/dev/null | head -2 | tr '\n' ' ')"
for r in $runs; do
  IFS=: read -r model bits g1 g2 bs <<<"$r"; g=$g1${g2:+:$g2}; n=$(name $model $bits $g $bs)
  [ -f "$out/$n.ckpt.h5" ] || "$bin" train --qat --wbits $bits --abits 8 --granularity $g ${bs:+--block-scales $bs} \
    --model $model --epochs 5 --seed 1 --data "$data" --out "$out/$n.ckpt.h5" --json > "$out/$n.train.json" 2>/dev/null
  "$bin" export --checkpoint "$out/$n.ckpt.h5" --out "$out/$n.qat.h5" >/dev/null
done
printf '%-22s %8s %8s %8s %9s %8s %10s %9s\n' model fake int agree hybrid numpy bytes "of W8"
w8=$(stat -c %s "$out/$(name mlp 8 channel).qat.h5")
for r in $runs; do
  IFS=: read -r model bits g1 g2 bs <<<"$r"; g=$g1${g2:+:$g2}; n=$(name $model $bits $g $bs); f="$out/$n.qat.h5"
  e=$("$bin" eval --model "$f" --compare fake --data "$data" --json 2>/dev/null)
  h=$("$bin" eval --model "$f" --engine hybrid --data "$data" --json 2>/dev/null | json "['test_accuracy']")
  # the test set's inputs as float32 (codegen_ref), the engine's integers as qat eval runs it (batches of 64)
  "$ref" "$f" "$data" 10000 "$out/$n.x.f32" "$out/$n.int.txt"
  "$bin" eval --model "$f" --data "$data" --outputs "$out/$n.int.npy" >/dev/null 2>&1
  /usr/bin/python3 "$root/tools/run_qat_h5.py" "$f" "$out/$n.x.f32" 10000 "$out/$n.np.i32" >/dev/null
  same=$(/usr/bin/python3 -c "
import numpy as np
y = np.fromfile('$out/$n.np.i32', np.int32).reshape(10000, -1)
e = np.load('$out/$n.int.npy').reshape(10000, -1)
print('equal' if (y == e).all() else 'DIFFER %d' % (y != e).sum())")
  size=$(stat -c %s "$f")
  printf '%-22s %8.4f %8.4f %8.4f %9.4f %8s %10d %8.1f%%\n' "$n" "$(echo "$e" | json "['compare_test_accuracy']")" \
    "$(echo "$e" | json "['test_accuracy']")" "$(echo "$e" | json "['agreement']")" "$h" "$same" "$size" \
    "$(awk -v a="$size" -v b="$w8" 'BEGIN { print 100 * a / b }')"
done
echo "inside $(name mlp 4 block:16).qat.h5 (bytes stored, after compression):"
/usr/bin/python3 - "$out/$(name mlp 4 block:16).qat.h5" <<'PY'
import sys, os, h5py
path = sys.argv[1]
parts, total = {}, os.path.getsize(path)
with h5py.File(path, "r") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            key = name.split("/")[-1]
            key = key if key in ("weight", "weight_scale", "weight_mlir", "weight_zero_point") else "other datasets"
            parts[key] = parts.get(key, 0) + obj.id.get_storage_size()
    f.visititems(visit)
for k in ("weight", "weight_scale", "weight_mlir", "weight_zero_point", "other datasets"):
    print(f"  {k:18s} {parts.get(k, 0):8d}")
print(f"  {'HDF5 metadata':18s} {total - sum(parts.values()):8d}")
PY
