#!/usr/bin/env bash
# Builds the device harness around a generated model and runs it under
# qemu-system-arm on Cortex-M cores, by default a Cortex-M4 (mps2-an386: the
# DSP path) and a Cortex-M3 (mps2-an385: the portable path). The generated
# NAME.c is compiled with strict C99 warnings; WORK/CORE.txt gets the
# harness's output (device_main.c) for each core.
#   qemu_run.sh GEN_DIR NAME INPUTS.inc WORK      (MCU_OPT: default -O2;
#   MCU_DEFS: more -D flags for the harness, e.g. -DQAT_INPUT_U8;
#   MCU_CORES: the cores, of cortex-m4 cortex-m3 cortex-m0plus cortex-m7
#   cortex-m33, or "all";
#   MCU_CYCLES_PLUGIN: the cycle-pricing plugin, bench/m4cycles, which
#   then writes WORK/cortex-m4.cycles)
# The boards: Cortex-M7 on mps2-an500; Cortex-M33 on mps2-an505 (its
# secure memory map, tools/qat/firmware/mps2-an505.ld). Debian's qemu has no Cortex-M0+ board
# with the memory these models need (the micro:bit's Cortex-M0 has 16 KiB of
# RAM, and the MPS2 boards accept only their own core), so the Cortex-M0+
# build (ARMv6-M, no DSP, no 32-bit multiply-long) runs on the Cortex-M3
# board: ARMv6-M is a subset of ARMv7-M with the same results, and the
# instructions executed are the M0+ binary's.
# Exit 77 without the Arm toolchain or qemu, 1 if a build or run fails.
set -euo pipefail
gen=$1 name=$2 inputs=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
fw=$(cd "$here/../../tools/qat/firmware" && pwd) # startup, semihosting, the boards' memory maps
for tool in arm-none-eabi-gcc qemu-system-arm; do
  command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/setup-mcu.sh)"; exit 77; }
done
up=$(echo "$name" | tr '[:lower:]' '[:upper:]')
mkdir -p "$work"
[ "$inputs" -ef "$work/inputs.inc" ] || cp "$inputs" "$work/inputs.inc"
strict=(-std=c99 -Wall -Wextra -Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion)
defs=(-DQAT_MODEL="$name" -DQAT_MODEL_UP="$up" -DQAT_MODEL_HEADER="\"$name.h\"" -I"$gen" -I"$here" -I"$fw" -I"$work" ${MCU_DEFS:-})
cores=${MCU_CORES:-cortex-m4 cortex-m3}
[ "$cores" = all ] && cores="cortex-m4 cortex-m3 cortex-m0plus cortex-m7 cortex-m33"
rc=0
for cpu in $cores; do
  ld=mps2.ld
  case $cpu in
    cortex-m4) mach=mps2-an386 qcpu=cortex-m4 ;;
    cortex-m3 | cortex-m0plus) mach=mps2-an385 qcpu=cortex-m3 ;;
    cortex-m7) mach=mps2-an500 qcpu=cortex-m7 ;;
    cortex-m33) mach=mps2-an505 qcpu=cortex-m33 ld=mps2-an505.ld ;;
    *) echo "qemu_run: unknown core $cpu" >&2; exit 2 ;;
  esac
  flags=(-mcpu=$cpu -mthumb -mfloat-abi=soft -ffunction-sections -fdata-sections)
  arm-none-eabi-gcc "${flags[@]}" "${MCU_OPT:--O2}" "${strict[@]}" -c "$gen/$name.c" -o "$work/$cpu.o"
  arm-none-eabi-gcc "${flags[@]}" -O2 -std=gnu99 -Wall -Wextra -Werror "${defs[@]}" "$here/device_main.c" \
    "$fw/startup.c" "$work/$cpu.o" -nostartfiles --specs=nano.specs --specs=nosys.specs -L "$fw" -T "$fw/$ld" \
    -Wl,--gc-sections -o "$work/$cpu.elf"
  plugin=()
  if [ -n "${MCU_CYCLES_PLUGIN:-}" ] && [ "$cpu" = cortex-m4 ]; then
    plugin=(-plugin "$MCU_CYCLES_PLUGIN,out=$work/$cpu.cycles,group=op")
  fi
  # a deadline: a model that faults or loops must not hang the suite
  if ! timeout 300 qemu-system-arm -M "$mach" -cpu "$qcpu" -nographic -monitor none -serial none \
      -semihosting-config enable=on,target=native -icount shift=0 -kernel "$work/$cpu.elf" "${plugin[@]}" \
      > "$work/$cpu.txt" 2>&1; then
    echo "qemu_run: $name on $cpu failed:"; tail -3 "$work/$cpu.txt"; rc=1
  fi
done
exit $rc
