#!/usr/bin/env bash
# The integer runtime on aarch64: builds tests/aarch64/runtime_main.c with
# the runtime's sources (qat_runtime: core and runtime, no other library)
# by aarch64-linux-gnu-gcc, statically, runs it under qemu-aarch64, and
# compares every output integer with the host build's (HOST_DRIVER). On
# aarch64 the runtime runs its portable kernels, qk.h's, with their NEON
# paths (program_f's wide maps take them); the host runs its best level,
# which every level's tests prove equal to the portable one; on qemu's
# default core (which has the dot-product extension: the SDOT paths) and on
# a Cortex-A53 (which has not). First, qk.h's
# NEON requantization against its scalar one, lane by lane, for both
# roundings (tests/aarch64/qk_check.c).
# Exit 77 (skipped) without aarch64-linux-gnu-gcc or qemu-aarch64
# (scripts/setup-mcu.sh installs them).
#   run.sh SOURCE_DIR WORKDIR HOST_DRIVER RUNTIME_SOURCES...
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 SOURCE_DIR WORKDIR HOST_DRIVER RUNTIME_SOURCES..." >&2; exit 2; }
src=$1 work=$2 host=$3
shift 3
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/setup-mcu.sh)"; exit 77; }
done
mkdir -p "$work"
for r in 0 1; do
  aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -static -DQK_SINGLE_ROUNDING=$r -I"$src/src" \
    "$src/tests/aarch64/qk_check.c" -o "$work/qk_check$r"
  qemu-aarch64 "$work/qk_check$r" || exit 1
done
sources=()
for f in "$@"; do sources+=("$src/$f"); done
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -static -DQAT_VERSION_STRING='"aarch64"' \
  -I"$src/include" -I"$src/src" -I"$src/tests" "$src/tests/aarch64/runtime_main.c" "${sources[@]}" -o "$work/runtime_aarch64"
"$host" > "$work/host.txt" 2> "$work/host.log"
lines=$(wc -l < "$work/host.txt")
rc=0
# qemu's default core has the dot-product extension; a Cortex-A53 (Armv8.0) has not: both paths
for cpu in max cortex-a53; do
  qemu-aarch64 -cpu $cpu "$work/runtime_aarch64" > "$work/aarch64-$cpu.txt" 2> "$work/aarch64-$cpu.log"
  if [ "$lines" -gt 0 ] && cmp -s "$work/host.txt" "$work/aarch64-$cpu.txt"; then
    echo "aarch64 ($cpu): $lines samples' outputs equal the host's ($(cat "$work/host.log") on the host," \
      "$(cat "$work/aarch64-$cpu.log") under qemu-aarch64)"
  else
    echo "aarch64 ($cpu): the outputs differ from the host's ($work/host.txt, $work/aarch64-$cpu.txt)"
    diff "$work/host.txt" "$work/aarch64-$cpu.txt" | head -5
    rc=1
  fi
done
exit $rc
