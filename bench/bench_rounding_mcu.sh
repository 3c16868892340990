#!/usr/bin/env bash
# The generated C's cost of each requantization rounding on a Cortex-M4
# (mps2-an386 under qemu-system-arm, tests/mcu/run.sh): instructions and
# estimated cycles (bench/m4cycles, docs/cycle-model.md) per inference, the
# model's code (.text of NAME.c) and flash (code + constants), the double
# rounding (the contract's) against the single one (qat export --rounding
# single), on the same trained weights (run.sh exports the +single variant
# from the checkpoint of the model before it): LeNet W8A8 and W4A4 on N
# MNIST test images, MLPerf Tiny's ResNet-8 W8A8 on 32x32x3 (its seeded set,
# tests/tflite/make_sets.py) on N_RESNET samples. Every output is checked
# bit for bit against qat's integer engine on the way. The counts are
# deterministic under qemu; the models are trained briefly (speed and size
# do not depend on the weights' values).
#   bench/bench_rounding_mcu.sh [BUILD_DIR] [DATA_DIR] [N] [N_RESNET]
#   (MCU_OPT: the generated code's optimization, default -O2; PYTHON: one
#   with numpy, default .venv/bin/python)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; n=${3:-100}; nr=${4:-20}
bin=$build/tools/qat/qat ref=$build/tests/codegen_ref py=${PYTHON:-$root/.venv/bin/python}
[ -x "$bin" ] && [ -x "$ref" ] || { echo "bench: build first (cmake --build build)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "generated code compiled with arm-none-eabi-gcc $(arm-none-eabi-gcc -dumpversion) ${MCU_OPT:--O2} -mthumb -mfloat-abi=soft"
rc=0
bash "$root/tests/mcu/run.sh" "$bin" "$ref" "$data" "$tmp/mnist" "$n" lenet lenet+single lenet:w4a4 lenet:w4a4+single |
  tee "$tmp/mnist.txt" || rc=$?
[ $rc = 77 ] && exit 77
"$py" "$root/tests/tflite/make_sets.py" "$tmp/sets" > /dev/null
bash "$root/tests/mcu/run.sh" "$bin" "$ref" "$tmp/sets/ic" "$tmp/ic" "$nr" resnet8-ic@"$tmp/sets/ic" \
  resnet8-ic+single@"$tmp/sets/ic" | tee "$tmp/ic.txt" || rc=$?
echo
echo "Cortex-M4 per inference, double against single rounding (the same weights):"
printf '%-12s %-7s %12s %8s %12s %8s %8s %8s\n' model rounding instructions "" "est. cycles" "" ".text" flash
for m in lenet lenet-w4a4 resnet8-ic; do
  for r in double single; do
    tag=$m; [ $r = single ] && tag=$m-single
    # run.sh's columns: tag consts code arena stack RAM insn-M4 cycles-M4 ...
    read -r _ consts code _ _ _ insn cycles _ < <(awk -v t="$tag" '$1 == t' "$tmp/mnist.txt" "$tmp/ic.txt")
    [ $r = double ] && d_insn=$insn d_cycles=$cycles
    di=$(awk -v a="$insn" -v b="$d_insn" 'BEGIN {printf "%+.2f%%", (a - b) * 100 / b}')
    dc=$(awk -v a="$cycles" -v b="$d_cycles" 'BEGIN {if (a + 0 == 0) print ""; else printf "%+.2f%%", (a - b) * 100 / b}')
    printf '%-12s %-7s %12d %8s %12s %8s %8d %8d\n' "$m" "$r" "$insn" "$di" "$cycles" "$dc" "$code" $((consts + code))
  done
done
exit $rc
