#!/usr/bin/env bash
# The cycle-pricing qemu plugin (bench/m4cycles) against hand-worked
# figures: tests/mcu/cycles_check.c runs a region of assembly whose
# Cortex-M4 instructions, cycles and taken branches are summed in its
# comments (docs/cycle-model.md's table); the plugin must report exactly
# those, by function and grouped. Exit 77 without the Arm toolchain, qemu, or the plugin header.
#   cycles_check.sh WORKDIR
set -euo pipefail
work=${1:?usage: cycles_check.sh WORKDIR}
here=$(cd "$(dirname "$0")" && pwd)
fw=$here/../../tools/qat/firmware
for tool in arm-none-eabi-gcc qemu-system-arm; do
  command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/setup-mcu.sh)"; exit 77; }
done
mkdir -p "$work"
bash "$here/../../bench/m4cycles/build.sh" "$work/libm4cycles.so" ||
  { rc=$?; [ $rc = 77 ] && echo "SKIPPED: no qemu plugin header (scripts/fetch-qemu-plugin-header.sh)"; exit $rc; }
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=soft -O2 -std=gnu99 -Wall -Wextra -Werror -I"$fw" \
  "$here/cycles_check.c" "$fw/startup.c" -nostartfiles --specs=nano.specs --specs=nosys.specs -L "$fw" -T "$fw/mps2.ld" \
  -o "$work/cycles_check.elf"
timeout 60 qemu-system-arm -M mps2-an386 -cpu cortex-m4 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$work/cycles_check.elf" \
  -plugin "$work/libm4cycles.so,out=$work/cycles.txt,group=priced" > "$work/guest.txt" 2>&1
fail=0
for what in instructions cycles "taken branches"; do
  want=$(sed -n "s/^expected $what: //p" "$work/guest.txt")
  got=$(sed -n "s/^$what: \([0-9]*\).*/\1/p" "$work/cycles.txt")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "$what: $got as worked out"; else
    echo "FAIL: $what: the plugin says '${got}', worked out by hand '${want}'"; fail=1; fi
done
grep -q '^regions: 1$' "$work/cycles.txt" || { echo "FAIL: not exactly one region"; cat "$work/cycles.txt"; fail=1; }
# grouped (group=priced): the region's function with the leaf it calls, so all of it;
# by function: the leaf's return alone (1 instruction, BX LR and its refill: 3 cycles)
grep -q '^group: priced 957 cycles 625 instructions$' "$work/cycles.txt" ||
  { echo "FAIL: the group of priced is not the whole region"; grep '^group' "$work/cycles.txt"; fail=1; }
grep -q '^function: leaf 3 cycles 1 instructions$' "$work/cycles.txt" ||
  { echo "FAIL: the leaf's own cost"; grep '^function' "$work/cycles.txt"; fail=1; }
exit $fail
