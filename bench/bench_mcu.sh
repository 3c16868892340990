#!/usr/bin/env bash
# The generated microcontroller code's figures, per reference model, on a
# Cortex-M4 (mps2-an386) under qemu-system-arm (and the instructions on a
# Cortex-M3, M0+, M7 and M33: tests/mcu/run.sh): flash (constants: weights,
# biases, multipliers, shifts, tables; code: the .text of NAME.c, from
# arm-none-eabi-size), RAM (the static arena + the stack high-water mark
# measured by painting the stack), and instructions per inference
# (SysTick under -icount shift=0, one instruction = 1 ns of virtual time;
# the counter is validated on a loop of known length, printed first) and
# estimated cycles (the qemu plugin of docs/cycle-model.md),
# averaged over N MNIST test images on which the outputs are also checked
# bit for bit against qat's integer engine. Then the issue's bars for
# LeNet W8A8. Every model is trained briefly (speed and size do not depend
# on the weights' values).
#   bench/bench_mcu.sh [BUILD_DIR] [DATA_DIR] [N]      (MCU_OPT=-Os for size)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; n=${3:-100}
bin=$build/tools/qat/qat ref=$build/tests/codegen_ref
[ -x "$bin" ] && [ -x "$ref" ] || { echo "bench: build first (cmake --build build)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "generated code compiled with arm-none-eabi-gcc $(arm-none-eabi-gcc -dumpversion) ${MCU_OPT:--O2} -mthumb -mfloat-abi=soft"
rc=0
bash "$root/tests/mcu/run.sh" "$bin" "$ref" "$data" "$tmp" "$n" lenet lenet:w4a8 lenet:w2a8 mlp resnet8 ds-cnn mobilenet-v1 | tee "$tmp/out.txt" || rc=$?
[ $rc = 77 ] && exit 77
line=$(grep '^lenet ' "$tmp/out.txt")
read -r _ consts code arena stack ram insn _ <<< "$line"
echo
echo "LeNet W8A8 on Cortex-M4 against the bars:"
verdict() { [ "$1" -le "$2" ] && echo "ok" || echo "OVER"; }
printf '  instructions per inference %8d  <= 1500000  %s\n' "$insn" "$(verdict "$insn" 1500000)"
printf '  RAM: arena + stack         %8d  <= 6144     %s (arena %d, stack %d)\n' "$ram" "$(verdict "$ram" 6144)" "$arena" "$stack"
printf '  code besides weights       %8d  <= 6144     %s (constants %d)\n' "$code" "$(verdict "$code" 6144)" "$consts"
echo "CMSIS-NN s8 reference (issue 13): 2.17 M instructions, 12.7 KB code besides 62.6 KB weights, 7.1 KB RAM"
echo
echo "MLPerf Tiny's models at their real sizes (tests/mcu/mlperf.sh, 20 samples each):"
bash "$root/tests/mcu/mlperf.sh" "$bin" "$ref" "$tmp/mlperf" 20 "${QAT_PYTHON:-$root/.venv/bin/python}" |
  tee "$tmp/mlperf.txt" || rc=$?
echo
echo "Estimated Cortex-M4 cycles against MLPerf Tiny's best published (Cortex-M4 at 120 MHz, docs/codegen.md; goal 0.8x):"
for anchor in resnet8-ic:19.8 ds-cnn-kws:5.2 mobilenet-v1-vww:10.7 ae-ad:0.49; do
  m=${anchor%%:*} best=${anchor##*:}
  cycles=$(awk -v m="$m" '$1 == m {print $8}' "$tmp/mlperf.txt")
  [ -n "$cycles" ] && [ "$cycles" != n/a ] || { echo "  $m: no estimate"; continue; }
  awk -v m="$m" -v c="$cycles" -v b="$best" 'BEGIN {printf "  %-17s %6.2f M cycles, best published %5.2f M: %.2fx\n", m, c / 1e6, b, c / 1e6 / b}'
done
exit $rc
