#!/usr/bin/env bash
# Builds the device harness around a generated model and runs it under
# qemu-system-arm on a Cortex-M4 (mps2-an386: the DSP path) and a
# Cortex-M3 (mps2-an385: the portable path). The generated NAME.c is
# compiled with strict C99 warnings; WORK/cortex-m4.txt and
# WORK/cortex-m3.txt get the harness's output (device_main.c).
#   qemu_run.sh GEN_DIR NAME INPUTS.inc WORK      (MCU_OPT: default -O2;
#   MCU_DEFS: more -D flags for the harness, e.g. -DQAT_INPUT_U8;
#   MCU_CYCLES_PLUGIN: the cycle-pricing plugin, bench/m4cycles, which
#   then writes WORK/cortex-m4.cycles)
# Exit 77 without the Arm toolchain or qemu, 1 if a build or run fails.
set -euo pipefail
gen=$1 name=$2 inputs=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
for tool in arm-none-eabi-gcc qemu-system-arm; do
  command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/setup-mcu.sh)"; exit 77; }
done
up=$(echo "$name" | tr '[:lower:]' '[:upper:]')
mkdir -p "$work"
[ "$inputs" -ef "$work/inputs.inc" ] || cp "$inputs" "$work/inputs.inc"
strict=(-std=c99 -Wall -Wextra -Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion)
defs=(-DQAT_MODEL="$name" -DQAT_MODEL_UP="$up" -DQAT_MODEL_HEADER="\"$name.h\"" -I"$gen" -I"$here" -I"$work" ${MCU_DEFS:-})
rc=0
for board in mps2-an386:cortex-m4 mps2-an385:cortex-m3; do
  mach=${board%%:*} cpu=${board##*:}
  flags=(-mcpu=$cpu -mthumb -mfloat-abi=soft -ffunction-sections -fdata-sections)
  arm-none-eabi-gcc "${flags[@]}" "${MCU_OPT:--O2}" "${strict[@]}" -c "$gen/$name.c" -o "$work/$cpu.o"
  arm-none-eabi-gcc "${flags[@]}" -O2 -std=gnu99 -Wall -Wextra -Werror "${defs[@]}" "$here/device_main.c" \
    "$here/startup.c" "$work/$cpu.o" -nostartfiles --specs=nano.specs --specs=nosys.specs -T "$here/mps2.ld" \
    -Wl,--gc-sections -o "$work/$cpu.elf"
  plugin=()
  if [ -n "${MCU_CYCLES_PLUGIN:-}" ] && [ "$cpu" = cortex-m4 ]; then
    plugin=(-plugin "$MCU_CYCLES_PLUGIN,out=$work/$cpu.cycles")
  fi
  # a deadline: a model that faults or loops must not hang the suite
  if ! timeout 300 qemu-system-arm -M "$mach" -cpu "$cpu" -nographic -monitor none -serial none \
      -semihosting-config enable=on,target=native -icount shift=0 -kernel "$work/$cpu.elf" "${plugin[@]}" \
      > "$work/$cpu.txt" 2>&1; then
    echo "qemu_run: $name on $cpu failed:"; tail -3 "$work/$cpu.txt"; rc=1
  fi
done
exit $rc
