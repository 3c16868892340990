#!/usr/bin/env bash
# qat fit's bars (docs/fit.md, "Measured"): LeNet on MNIST and DS-CNN for
# 49x10 input on the generated KWS-like set (scripts/make-synthetic.py kws),
# each trained at W8A8, then
#   - fit: `qat fit --checkpoint` with a flash budget that gives the weights
#     half their W8 bytes (the constants of the W8A8 C minus half its weight
#     bytes: biases, multipliers and tables stay as they are), fine-tuned
#     --ft epochs from the trained weights, checked on the linked Cortex-M4
#     binary;
#   - W8A8: the same trained weights trained --ft more epochs at W8A8;
#   - W4A8: the same trained weights fine-tuned --ft epochs at uniform W4;
#   every fine-tune (fit's too: its --ft-lr default) at a tenth of the
#   training run's peak learning rate;
#   - LeNet only, fit+cycles: `qat fit` with the same flash budget and
#     --cycles (default 1.10M estimated Cortex-M4 cycles, --cycle-margin
#     0.5: W8A8 takes about 0.98 M but is over the flash, uniform W4 about
#     1.17 M: packed weights cost cycles to unpack; at half the flash fc1's
#     48 000 weights cannot stay at 8 bits, and the cheapest choice takes
#     about 1.06 M), no RAM budget, its run checked under qemu;
# every one exported, its C generated, and its integer accuracy measured on
# the test split by the integer engine. Prints a table per model and seed:
# constants (bytes, the generated C), arena (bytes), integer accuracy, and
# fit's RAM budget: 80 % of the W8A8 arena (the default plan's).
#
#   bench/fit_bars.sh [--build DIR] [--work DIR] [--seeds "1 2 3"] [--epochs N] [--ft N] [--lenet-cycles N]
# Defaults: seeds "1", 5 epochs (LeNet) / 10 (DS-CNN), --ft 2. Needs the
# build, arm-none-eabi-gcc, qemu-system-arm and the cycle plugin (the
# build's, or QAT_M4CYCLES_PLUGIN), .venv (scripts/setup-python.sh: numpy).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build work=$root/out/fit-bars seeds="1" epochs_lenet=5 epochs_kws=10 ft=2 lenet_cycles=1.10M
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --epochs) epochs_lenet=$2 epochs_kws=$2; shift 2 ;;
        --ft) ft=$2; shift 2 ;;
        --lenet-cycles) lenet_cycles=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "fit_bars: unknown option $1" >&2; exit 2 ;;
    esac
done
qat=$build/tools/qat/qat py=$root/.venv/bin/python
[ -x "$qat" ] || { echo "fit_bars: no $qat (build first)" >&2; exit 1; }
[ -x "$py" ] || { echo "fit_bars: no $py (scripts/setup-python.sh)" >&2; exit 1; }
mkdir -p "$work"
mnist=${QAT_MNIST_DATA:-$root/data/mnist}
kws=$work/kws
[ -f "$kws/train_x.npy" ] || "$py" "$root/scripts/make-synthetic.py" kws "$kws" --train 6000 --test 2000 --seed 1 >/dev/null
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/cpu: /'; date -u +"date: %Y-%m-%d"

# weight elements of a checkpoint: each Linear/Conv's parameters less its bias (one per output channel)
weights() {
    "$qat" summary --checkpoint "$1" --json 2>/dev/null | tail -1 | "$py" -c '
import json, sys
rows = json.load(sys.stdin)["rows"]
print(sum(r["params"] - r["shape"][0] for r in rows if r.get("weights")))'
}
# "constants arena" of a quantized model's generated C
c_sizes() { # MODEL [small]
    local dir=$1.c; mkdir -p "$dir"
    "$qat" export --quantized "$1" --c "$dir" --name m --c-ram "${2:-fast}" 2>&1 | sed -n 's/.*; \([0-9]*\) bytes of constants; a static arena of \([0-9]*\) bytes.*/\1 \2/p'
}
int_acc() { "$qat" eval --model "$1" --data "$2" --json 2>/dev/null | tail -1 | "$py" -c 'import json,sys; print("%.2f" % (100 * json.load(sys.stdin)["test_accuracy"]))'; }

run_model() { # name model data epochs lr seed
    local name=$1 model=$2 data=$3 epochs=$4 lr=$5 seed=$6 d=$work/$1-s$6
    mkdir -p "$d"
    local common=(--model "$model" --data "$data" --lr "$lr" --seed "$seed")
    # each step is skipped when its output is there (delete WORK to start again)
    [ -f "$d/trained.ckpt.h5" ] || "$qat" train "${common[@]}" --qat --epochs "$epochs" --out "$d/trained.ckpt.h5" 2>"$d/train.log"
    # the fine-tunes, fit's included (its --ft-lr default), at a tenth of the training run's peak learning rate
    local ftc=(--qat --epochs "$ft" --lr "$(awk -v x="$lr" 'BEGIN { printf "%.9g", x / 10 }')" --init "$d/trained.ckpt.h5")
    [ -f "$d/w8.ckpt.h5" ] || "$qat" train "${common[@]}" "${ftc[@]}" --out "$d/w8.ckpt.h5" 2>"$d/w8.log"
    [ -f "$d/w4.ckpt.h5" ] || "$qat" train "${common[@]}" "${ftc[@]}" --wbits 4 --out "$d/w4.ckpt.h5" 2>"$d/w4.log"
    for c in w8 w4; do [ -f "$d/$c.qat.h5" ] || "$qat" export --checkpoint "$d/$c.ckpt.h5" --out "$d/$c.qat.h5" 2>/dev/null; done
    read -r c8 a8 < <(c_sizes "$d/w8.qat.h5")
    local w; w=$(weights "$d/trained.ckpt.h5")
    local budget=$(( c8 - w + w / 2 ))
    local ram=$(( a8 * 8 / 10 ))
    [ -f "$d/fit/fit.qat.h5" ] || "$qat" fit "${common[@]}" --checkpoint "$d/trained.ckpt.h5" --flash "$budget" --ram "$ram" --ft-epochs "$ft" --out "$d/fit" \
        --json >"$d/fit.json" 2>"$d/fit.log" || { echo "fit_bars: $name: qat fit failed (see $d/fit.log)" >&2; tail -3 "$d/fit.log" >&2; }
    read -r c4 a4 < <(c_sizes "$d/w4.qat.h5")
    read -r cf af < <(c_sizes "$d/fit/fit.qat.h5")
    echo
    echo "$name, seed $seed: $w weights; flash budget $budget B (W8A8 constants $c8 less half of $w weight bytes); RAM budget $ram B (80 % of the W8A8 arena, arena + stack)"
    printf '%-8s %10s %8s %10s  %s\n' config constants arena "int acc %" bits
    printf '%-8s %10s %8s %10s\n' W8A8 "$c8" "$a8" "$(int_acc "$d/w8.qat.h5" "$data")"
    printf '%-8s %10s %8s %10s\n' W4A8 "$c4" "$a4" "$(int_acc "$d/w4.qat.h5" "$data")"
    local plan; plan=$(sed -n 's/.*"c_ram": "\([a-z]*\)".*/\1/p' "$d/fit.json")
    [ "$plan" = small ] && read -r cf af < <(c_sizes "$d/fit/fit.qat.h5" small)
    printf '%-8s %10s %8s %10s  %s (%s plan)\n' fit "$cf" "$af" "$(int_acc "$d/fit/fit.qat.h5" "$data")" \
        "$(sed -n 's/.*"bits": \({.*}\)}$/\1/p' "$d/fit.json")" "$plan"
    sed -n 's/^qat: the linked binary/  linked:/p' "$d/fit.log"
    [ "$name" = lenet ] || return 0
    [ -f "$d/fit-cycles/fit.qat.h5" ] || "$qat" fit "${common[@]}" --checkpoint "$d/trained.ckpt.h5" --flash "$budget" \
        --cycles "$lenet_cycles" --cycle-margin 0.5 --ft-epochs "$ft" --out "$d/fit-cycles" --json >"$d/fit-cycles.json" 2>"$d/fit-cycles.log" ||
        { echo "fit_bars: $name: qat fit --cycles failed (see $d/fit-cycles.log)" >&2; tail -3 "$d/fit-cycles.log" >&2; }
    read -r cc ac < <(c_sizes "$d/fit-cycles/fit.qat.h5")
    local cyc u4 u8
    cyc=$(sed -n 's/.*"cycles": \([0-9]*\).*/\1/p' "$d/fit-cycles.json")
    u4=$(awk -F, '$1 == "uniform" && $7 == "4 4 4 4 4" {print $4}' "$d/fit-cycles/front.csv")
    u8=$(awk -F, '$1 == "uniform" && $7 == "8 8 8 8 8" {print $4}' "$d/fit-cycles/front.csv")
    printf '%-8s %10s %8s %10s  %s; %s cycles on the run (--cycles %s; predicted uniform W4 %s, W8 %s)\n' fit+cyc "$cc" "$ac" \
        "$(int_acc "$d/fit-cycles/fit.qat.h5" "$data")" "$(sed -n 's/.*"bits": \({.*}\)}$/\1/p' "$d/fit-cycles.json")" \
        "$cyc" "$lenet_cycles" "$u4" "$u8"
}

for s in $seeds; do
    run_model lenet lenet "$mnist" "$epochs_lenet" 0.001 "$s"
    run_model ds-cnn "$root/models/ds-cnn-kws.qnet" "$kws" "$epochs_kws" 0.003 "$s"
done
