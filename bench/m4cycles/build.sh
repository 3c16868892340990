#!/usr/bin/env bash
# Builds a qemu plugin of this folder into OUT.so against the installed
# qemu's plugin header (fetched once into .deps/qemu-plugin by
# scripts/fetch-qemu-plugin-header.sh): the cycle-pricing one (m4_cycles.c,
# the default), or SOURCE (insn_count.c: instructions between markers, for
# aarch64). Exit 77 when the header cannot be had.
#   bench/m4cycles/build.sh OUT.so [SOURCE]
set -euo pipefail
out=${1:?usage: build.sh OUT.so [SOURCE]}
source=${2:-m4_cycles.c}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
inc=${QAT_QEMU_PLUGIN_INCLUDE:-$root/.deps/qemu-plugin}
if [ ! -f "$inc/qemu-plugin.h" ]; then
  bash "$root/scripts/fetch-qemu-plugin-header.sh" "$inc" || exit 77
fi
cc -std=gnu11 -O2 -Wall -Wextra -Wpedantic -Werror -fPIC -shared -I"$inc" "$here/$source" -o "$out"
