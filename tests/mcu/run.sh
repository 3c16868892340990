#!/usr/bin/env bash
# The generated microcontroller code, end to end, for each model named:
#   train it briefly (qat train --qat on a slice of MNIST, or of its own
#   data set), export its quantized file and its C (qat export --c), run
#   the first N test samples through qat's integer engine (codegen_ref), then
#   - host: NAME.c compiled with -std=c99 -Wall -Wextra -Wpedantic -Werror
#     -Wdouble-promotion -Wfloat-conversion, run: the same integers;
#   - the quantized file run by numpy alone (tools/run_qat_h5.py), where
#     Debian's python3-h5py is installed: the same integers;
#   - no float: NAME.c for a Cortex-M0 with -mfloat-abi=soft references no
#     __aeabi_f*/__aeabi_d* routine (and NAME_io.c does: the check can fail);
#     nor, on any core at MCU_OPT and on a Cortex-M0+ at -Os too, libgcc's
#     64-bit shifts __aeabi_llsl/__aeabi_llsr/__aeabi_lasr (a Cortex-M0+
#     calls one for a 64-bit variable shift at -Os: the check can fail);
#   - Cortex-M4 (mps2-an386, DSP path), Cortex-M3 (mps2-an385, portable
#     path), Cortex-M0+ (ARMv6-M, on the M3's board: qemu_run.sh says why),
#     Cortex-M7 (mps2-an500) and Cortex-M33 (mps2-an505) under
#     qemu-system-arm: the same integers;
#   - aarch64 Linux (strict C99, static) under qemu-aarch64, where
#     aarch64-linux-gnu-gcc and qemu-aarch64 are installed, with qk.h's NEON
#     paths, with its dot-product paths too (-march=armv8.2-a+dotprod) and
#     without either (-DQAT_NO_NEON): the same integers, and each one's
#     instructions per inference (bench/m4cycles/insn_count.c);
#   and prints each model's flash (code, constants), RAM (arena, stack),
#   instructions per inference on each core, and the Cortex-M4's
#   estimated cycles (the qemu plugin bench/m4cycles, docs/cycle-model.md;
#   "n/a" where its header cannot be had; its instruction count must agree
#   with SysTick's within 0.5 %).
# usage: run.sh QAT_MNIST CODEGEN_REF MNIST_DIR WORKDIR N MODEL...
# (MODEL: a name in models/, e.g. lenet, or a path under the source tree
# without .qnet, e.g. tests/models/lenet-mixed; NAME:wNaM for N-bit weights and
# M-bit activations, e.g. lenet:w4a4; default W8A8; NAME@DATA trains and
# runs it on another data set than MNIST_DIR, any that qat train reads,
# its first N test samples; NAME+small generates the C with the small-RAM
# plan, qat export --c-ram small; NAME+single exports the program with the
# single rounding, qat export --rounding single, from the checkpoint of the
# same model listed before it when there is one, whose engine's integers
# it must then differ from: the test tells the roundings apart). Exit 77 (skipped) without
# arm-none-eabi-gcc or qemu-system-arm (scripts/setup-mcu.sh installs them).
# MCU_OPT (default -O2) is the optimization of the generated code.
# MCU_HOST_ONLY=1 stops each model after the host and numpy checks (no
# cross build, no qemu), with MCU_HOST_CFLAGS added to the host build: the
# ASan+UBSan build's run, where what the sanitizers see is the host (the
# tool, and the generated C built with -fsanitize=address,undefined); the
# cross builds and their runs are the normal build's.
set -euo pipefail
[ $# -ge 6 ] || { echo "usage: $0 QAT_MNIST CODEGEN_REF MNIST_DIR WORKDIR N MODEL..." >&2; exit 2; }
bin=$1 ref=$2 data=$3 work=$4 n=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
opt=${MCU_OPT:--O2}
for tool in arm-none-eabi-gcc arm-none-eabi-nm arm-none-eabi-size qemu-system-arm; do
  command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/setup-mcu.sh)"; exit 77; }
done
[ -d "$data" ] || { echo "SKIPPED: no MNIST in $data"; exit 77; }
mkdir -p "$work"
strict=(-std=c99 -Wall -Wextra -Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion)
if bash "$src/bench/m4cycles/build.sh" "$work/libm4cycles.so" 2> "$work/plugin.log"; then
  export MCU_CYCLES_PLUGIN="$work/libm4cycles.so"
else
  unset MCU_CYCLES_PLUGIN; echo "cycles: n/a, the plugin did not build ($(tail -1 "$work/plugin.log"))"
fi
if bash "$src/bench/m4cycles/build.sh" "$work/libinsncount.so" insn_count.c 2>> "$work/plugin.log"; then
  A64_COUNT_PLUGIN="$work/libinsncount.so"
else
  A64_COUNT_PLUGIN=; echo "aarch64 instructions: n/a, the counting plugin did not build"
fi
fail=0
summary=()
cores=(cortex-m4 cortex-m3 cortex-m0plus cortex-m7 cortex-m33)
declare -A ckpts=() doubles=() # a model's checkpoint and its double-rounding integers, by model, bits and data
helpers='__aeabi_(ll(sl|sr)|lasr)'

# The shift-helper check can fail: a 64-bit variable shift on a Cortex-M0+ at -Os calls one.
printf 'long long q(long long x, int s) { return x << s; }\n' > "$work/llsl.c"
arm-none-eabi-gcc -mcpu=cortex-m0plus -mthumb -Os -c "$work/llsl.c" -o "$work/llsl.o"
if ! arm-none-eabi-nm -u "$work/llsl.o" | grep -qE "$helpers"; then
  echo "FAIL: the shift-helper check sees no helper even in a 64-bit variable shift on a Cortex-M0+"; fail=1
fi

# Instructions per inference from a core's harness output: SysTick ticks
# over the inferences, times the instructions per tick its calibration
# loop measured (each board's SysTick runs at its own rate).
core_insns() {
  local ci ct t
  read -r ci ct < <(sed -n 's/^calibration: \([0-9]*\) instructions in \([0-9]*\) ticks.*/\1 \2/p' "$1")
  t=$(sed -n 's/^ticks: total \([0-9]*\) .*/\1/p' "$1")
  echo $(( t * ci / ct / n ))
}

for spec in "$@"; do
  mdata=$data
  if [[ $spec == *@* ]]; then mdata=${spec#*@} spec=${spec%%@*}; fi
  cram=() rounding=() suffix=
  if [[ $spec == *+small* ]]; then cram=(--c-ram small) spec=${spec/+small/} suffix+=-small; fi
  if [[ $spec == *+single* ]]; then rounding=(--rounding single) spec=${spec/+single/} suffix+=-single; fi
  model=${spec%%:*} bits=()
  if [[ $spec == *:w*a* ]]; then
    b=${spec##*:w}
    bits=(--wbits "${b%%a*}" --abits "${b##*a}")
  fi
  qnet=$src/models/$model.qnet
  if [[ $model == */* ]]; then qnet=$src/$model.qnet spec=${spec##*/} model=${model##*/}; fi
  tag=${spec//:/-}$suffix
  name=${tag//-/_}
  up=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  w="$work/$tag"
  rm -rf "$w" && mkdir -p "$w/gen"
  case $model in lenet | mlp) limit=2048 ;; *) limit=256 ;; esac  # bit-exactness needs no accuracy
  key="$qnet ${bits[*]} $mdata" ckpt=${ckpts[$key]:-}
  if [ -z "$ckpt" ]; then
    ckpt=$w/train.ckpt
    "$bin" train --model-file "$qnet" --qat "${bits[@]}" --limit-train $limit --limit-test 100 --epochs 1 \
      --data "$mdata" --out "$ckpt" > "$w/train.log" 2>&1 || { echo "FAIL $tag: training"; tail "$w/train.log"; fail=1; continue; }
    ckpts[$key]=$ckpt
  fi
  "$bin" export --checkpoint "$ckpt" --out "$w/model.qat.h5" --c "$w/gen" --name "$name" "${cram[@]}" "${rounding[@]}" \
    2> "$w/export.log" || { echo "FAIL $tag: export"; cat "$w/export.log"; fail=1; continue; }
  "$ref" "$w/model.qat.h5" "$mdata" "$n" "$w/images.f32" "$w/expected.txt"
  # the rounding reaches the C as the kernels' switch, and (against the same
  # weights rounded twice) changes some integers: the checks below can tell
  if [ ${#rounding[@]} -gt 0 ]; then
    grep -qx '#define QK_SINGLE_ROUNDING 1' "$w/gen/$name.c" || { echo "FAIL $tag: no QK_SINGLE_ROUNDING in $name.c"; fail=1; }
    if [ -n "${doubles[$key]:-}" ]; then
      differ=$(paste -d' ' "${doubles[$key]}" "$w/expected.txt" | awk '{h = NF / 2; for (i = 2; i <= h; i++) d += $i != $(h + i)}
        END {print d + 0}')
      echo "$tag: the single rounding changes $differ of the engine's output integers on $n samples"
      [ "$differ" -gt 0 ] || { echo "FAIL $tag: the same integers as the double rounding: the test cannot tell them apart"; fail=1; }
    fi
  else
    if grep -qx '#define QK_SINGLE_ROUNDING 1' "$w/gen/$name.c"; then echo "FAIL $tag: QK_SINGLE_ROUNDING in $name.c"; fail=1; fi
    doubles[$key]=${doubles[$key]:-$w/expected.txt}
  fi
  defs=(-DQAT_MODEL="$name" -DQAT_MODEL_UP="$up" -DQAT_MODEL_HEADER="\"$name.h\"" -I"$w/gen" -I"$here")

  # host: strict C99, then the same integers as the engine
  # shellcheck disable=SC2086 # MCU_HOST_CFLAGS: several flags
  cc "${strict[@]}" -O2 ${MCU_HOST_CFLAGS:-} -c "$w/gen/$name.c" -o "$w/host_model.o"
  # shellcheck disable=SC2086
  cc "${strict[@]}" -O2 ${MCU_HOST_CFLAGS:-} "${defs[@]}" "$here/host_main.c" "$w/gen/${name}_io.c" "$w/host_model.o" -o "$w/host"
  "$w/host" "$w/images.f32" "$n" "$w/host.txt" "$w/inputs.inc"
  if cmp -s "$w/host.txt" "$w/expected.txt"; then host="$n/$n"; else host="DIFFERS"; fail=1; echo "FAIL $tag: host"; fi

  # the quantized file run by numpy alone (tools/run_qat_h5.py, from the format's docs): the same integers
  npy="n/a"
  if /usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null; then
    if /usr/bin/python3 "$src/tools/run_qat_h5.py" "$w/model.qat.h5" "$w/images.f32" "$n" "$w/numpy.i32" >/dev/null &&
      /usr/bin/python3 -c 'import sys, numpy as np
got = np.fromfile(sys.argv[1], np.int32).reshape(int(sys.argv[3]), -1)
want = np.array([l.split(":")[1].split() for l in open(sys.argv[2])], np.int32)
sys.exit(0 if got.shape == want.shape and (got == want).all() else 1)' "$w/numpy.i32" "$w/expected.txt" "$n"; then
      npy="$n/$n"
    else
      npy="DIFFERS"; fail=1; echo "FAIL $tag: the numpy reader"
    fi
  fi
  if [ "${MCU_HOST_ONLY:-0}" = 1 ]; then
    summary+=("$(printf '%-18s host-only: the generated C on the host %s, the numpy reader %s' "$tag" "$host" "$npy")")
    continue
  fi

  # aarch64 (Linux, under qemu-aarch64), with qk.h's NEON paths, with its dot-product ones too
  # (-march=armv8.2-a+dotprod: qemu's default core has the extension) and with neither
  # (-DQAT_NO_NEON, the portable C): the same integers, where the cross tools are installed;
  # and the instructions per inference of each, where the counting plugin builds
  a64="n/a" a64_neon=n/a a64_dot=n/a a64_plain=n/a
  if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then
    a64=
    for v in neon dot plain; do
      nn=(); [ $v = plain ] && nn=(-DQAT_NO_NEON); [ $v = dot ] && nn=(-march=armv8.2-a+dotprod)
      aarch64-linux-gnu-gcc "${strict[@]}" -O2 -static "${defs[@]}" "${nn[@]}" "$here/host_main.c" \
        "$w/gen/${name}_io.c" "$w/gen/$name.c" -o "$w/aarch64-$v"
      count=(); [ -n "${A64_COUNT_PLUGIN:-}" ] && count=(-plugin "$A64_COUNT_PLUGIN,out=$w/aarch64-$v.count")
      qemu-aarch64 "${count[@]}" "$w/aarch64-$v" "$w/images.f32" "$n" "$w/aarch64-$v.txt" -
      if cmp -s "$w/aarch64-$v.txt" "$w/expected.txt"; then a64+=${a64:+,}$n/$n; else
        a64+=${a64:+,}DIFFERS; fail=1; echo "FAIL $tag: aarch64 ($v)"; fi
      if [ -f "$w/aarch64-$v.count" ]; then
        read -r regions counted < <(awk '/^regions:/ {r = $2} /^instructions:/ {i = $2}
          END {printf "%.0f %.0f\n", r, i}' "$w/aarch64-$v.count")
        [ "$regions" = "$n" ] || { echo "FAIL $tag: the counting plugin saw $regions inferences, not $n"; fail=1; }
        printf -v "a64_$v" '%d' $(( counted / (regions + (regions == 0)) ))
      fi
    done
  fi

  # no float in the integer path: a Cortex-M0 has no FPU, so any float
  # operation becomes a call to an __aeabi_f*/__aeabi_d* routine
  m0=(-mcpu=cortex-m0 -mthumb -mfloat-abi=soft "$opt" "${strict[@]}")
  arm-none-eabi-gcc "${m0[@]}" -c "$w/gen/$name.c" -o "$w/m0.o"
  arm-none-eabi-gcc "${m0[@]}" -c "$w/gen/${name}_io.c" -o "$w/m0_io.o"
  if arm-none-eabi-nm -u "$w/m0.o" | grep -E '__aeabi_[fd]'; then echo "FAIL $tag: float in $name.c"; fail=1; fi
  if ! arm-none-eabi-nm -u "$w/m0_io.o" | grep -qE '__aeabi_f'; then
    echo "FAIL $tag: the float check sees no float even in ${name}_io.c"; fail=1
  fi
  # no 64-bit shift helper: on every core at MCU_OPT (the builds below), and
  # on a Cortex-M0+ at -Os, where GCC calls one for a 64-bit variable shift
  # (the Thumb-2 cores shift inline at every level)
  arm-none-eabi-gcc -mcpu=cortex-m0plus -mthumb -mfloat-abi=soft -Os "${strict[@]}" -c "$w/gen/$name.c" -o "$w/m0plus-Os.o"
  if arm-none-eabi-nm -u "$w/m0plus-Os.o" | grep -E "$helpers"; then echo "FAIL $tag: a shift helper on cortex-m0plus at -Os"; fail=1; fi

  # Cortex-M4 (DSP), M3, M0+ (on the M3's board), M7 (DSP) and M33 (DSP) under qemu
  MCU_CORES="${cores[*]}" bash "$here/qemu_run.sh" "$w/gen" "$name" "$w/inputs.inc" "$w" ||
    { echo "FAIL $tag: the Cortex-M builds or runs"; fail=1; continue; }
  res=() insns=()
  for cpu in "${cores[@]}"; do
    if arm-none-eabi-nm -u "$w/$cpu.o" | grep -E "__aeabi_[fd]|$helpers"; then echo "FAIL $tag: a float or shift helper on $cpu"; fail=1; fi
    if grep '^[0-9]*:' "$w/$cpu.txt" | cmp -s - "$w/expected.txt"; then res+=("$n/$n"); else res+=("DIFFERS"); fail=1; echo "FAIL $tag: $cpu"; fi
    insns+=("$(core_insns "$w/$cpu.txt")")
  done
  insn=${insns[0]}
  cal_i=$(sed -n 's/^calibration: \([0-9]*\) instructions in \([0-9]*\) ticks.*/\1/p' "$w/cortex-m4.txt")
  cal_t=$(sed -n 's/^calibration: \([0-9]*\) instructions in \([0-9]*\) ticks.*/\2/p' "$w/cortex-m4.txt")

  # the figures, on the Cortex-M4 build
  read -r code consts arena < <(arm-none-eabi-size -A "$w/cortex-m4.o" |
    awk '/^\.text/ {t += $2} /^\.rodata/ {r += $2} /^\.bss/ {b += $2} END {print t + 0, r + 0, b + 0}')
  stack=$(sed -n 's/^stack: \([0-9]*\) bytes/\1/p' "$w/cortex-m4.txt")
  cycles=n/a
  if [ -f "$w/cortex-m4.cycles" ]; then
    read -r regions p_insn p_cycles < <(awk '/^regions:/ {r = $2} /^instructions:/ {i = $2} /^cycles:/ {c = $2}
      END {printf "%.0f %.0f %.0f\n", r, i, c}' "$w/cortex-m4.cycles")
    if [ "$regions" != "$n" ] || [ $(( (p_insn / n - insn) * 200 / (insn + 1) )) -ne 0 ]; then
      echo "FAIL $tag: the cycle plugin saw $regions inferences and $(( p_insn / (regions + (regions == 0)) ))" \
        "instructions each; SysTick $n and $insn"; fail=1
    fi
    cycles=$(( p_cycles / n ))
  fi
  summary+=("$(printf '%-18s %9d %7d %7d %6d %8d %10d %10s %10d %10d %10d %10d %10s %10s %10s  %s %s %s %s %s %s %s %s' \
    "$tag" "$consts" "$code" "$arena" "$stack" $((arena + stack)) "$insn" "$cycles" "${insns[1]}" "${insns[2]}" \
    "${insns[3]}" "${insns[4]}" "$a64_neon" "$a64_dot" "$a64_plain" "$host" "$npy" "${res[@]}" "$a64")")
done

[ "${MCU_HOST_ONLY:-0}" = 1 ] || echo "calibration (Cortex-M4, -icount shift=0): ${cal_i:-?} instructions of a known loop in ${cal_t:-?} SysTick ticks"
[ "${MCU_HOST_ONLY:-0}" = 1 ] || printf '%-18s %9s %7s %7s %6s %8s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n' model "consts(B)" "code(B)" \
  "arena" stack RAM "insn M4" "cycles M4" "insn M3" "insn M0+" "insn M7" "insn M33" "insn A64" "A64 SDOT" "A64 plain" \
  "bit-exact host/numpy/M4/M3/M0+/M7/M33/aarch64 NEON,SDOT,plain"
for s in "${summary[@]}"; do echo "$s"; done
if [ ${#summary[@]} -ne $# ]; then # a model that stopped the loop without a FAIL line must not pass unseen
  echo "FAIL: ${#summary[@]} of the $# models finished"; fail=1
fi
[ $fail = 0 ] && echo "mcu: all passed" || echo "mcu: FAILED"
exit $fail
