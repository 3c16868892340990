#!/usr/bin/env bash
# The requantization's rounding (docs/quantization.md, "Requantization:
# double or single rounding"): each model trained once per seed (fake
# quantization does not depend on the rounding), exported twice — the
# contract's double rounding and the single one — and each file's integer
# accuracy measured on the MNIST test split by the integer engine, with its
# agreement with the file's fake-quantized engine (--compare fake).
#
#   bench/rounding_bars.sh [--build DIR] [--work DIR] [--seeds "1 2 3"] [--bits "4 8"]
#                          [--models "lenet resnet8 ds-cnn"]
# Recipes: W4A4 2 float + 5 QAT epochs, W8A8 5 QAT epochs; LeNet lr 0.001,
# ResNet-8 (models/resnet8.qnet) lr 0.003, DS-CNN (models/ds-cnn.qnet) lr
# 0.001 (thin margins: docs/quantization.md); seed as given. A checkpoint
# already in --work (MODEL-wB-sSEED.ckpt.h5) is reused.
# Prints one line per model, bits, seed and rounding, then the means.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build work=$root/out/rounding-bars seeds="1 2 3" bits="4 8" models="lenet resnet8"
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --bits) bits=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "rounding_bars: unknown option $1" >&2; exit 2 ;;
    esac
done
qat=$build/tools/qat/qat
[ -x "$qat" ] || { echo "rounding_bars: no $qat (build first)" >&2; exit 1; }
mkdir -p "$work"
mnist=${QAT_MNIST_DATA:-$root/data/mnist}
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/cpu: /'; date -u +"date: %Y-%m-%d"
json() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(" ".join(str(d[k]) for k in sys.argv[1:]))' "$@"; }

printf "%-8s %-5s %-4s %-7s %9s %9s %9s\n" model bits seed rounding int_acc fake_acc agree
for m in $models; do
    model=$m lr=0.001
    [ "$m" = resnet8 ] && model=$root/models/resnet8.qnet lr=0.003
    [ "$m" = ds-cnn ] && model=$root/models/ds-cnn.qnet
    for b in $bits; do
        extra=(--epochs 5)
        [ "$b" -lt 8 ] && extra=(--float-epochs 2 --epochs 5)
        for s in $seeds; do
            ckpt=$work/$m-w$b-s$s.ckpt.h5
            [ -f "$ckpt" ] || "$qat" train --model "$model" --data "$mnist" --qat --wbits "$b" --abits "$b" \
                "${extra[@]}" --lr "$lr" --seed "$s" --out "$ckpt" --json > "$work/$m-w$b-s$s.log" 2>&1
            for r in double single; do
                f=$work/$m-w$b-s$s-$r.qat.h5
                "$qat" export --checkpoint "$ckpt" --out "$f" --rounding "$r" --json > /dev/null 2>&1
                read -r acc facc agree < <("$qat" eval --model "$f" --data "$mnist" --compare fake --json 2>/dev/null |
                                         json test_accuracy compare_test_accuracy agreement)
                printf "%-8s W%sA%-2s %-4s %-7s %8.2f%% %8.2f%% %8.2f%%\n" "$m" "$b" "$b" "$s" "$r" \
                    "$(python3 -c "print(100*$acc)")" "$(python3 -c "print(100*$facc)")" "$(python3 -c "print(100*$agree)")"
            done
        done
    done
done | tee "$work/table.txt"
# the means per model, bits and rounding
python3 - "$work/table.txt" <<'PY'
import sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 7 and p[0] != "model":
        rows[(p[0], p[1], p[3])].append([float(v.rstrip("%")) for v in p[4:]])
for (m, b, r), v in rows.items():
    n = len(v)
    print(f"mean {m:8s} {b:5s} {r:7s} int {sum(x[0] for x in v)/n:.2f} %  fake {sum(x[1] for x in v)/n:.2f} %  "
          f"agreement {sum(x[2] for x in v)/n:.2f} %  ({n} seeds)")
PY
