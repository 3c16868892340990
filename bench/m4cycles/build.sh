#!/usr/bin/env bash
# Builds the cycle-pricing qemu plugin (m4_cycles.c) into OUT.so against the
# installed qemu's plugin header (fetched once into .deps/qemu-plugin by
# scripts/fetch-qemu-plugin-header.sh). Exit 77 when the header cannot be had.
#   bench/m4cycles/build.sh OUT.so
set -euo pipefail
out=${1:?usage: build.sh OUT.so}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
inc=${QAT_QEMU_PLUGIN_INCLUDE:-$root/.deps/qemu-plugin}
if [ ! -f "$inc/qemu-plugin.h" ]; then
  bash "$root/scripts/fetch-qemu-plugin-header.sh" "$inc" || exit 77
fi
cc -std=gnu11 -O2 -Wall -Wextra -Wpedantic -Werror -fPIC -shared -I"$inc" "$here/m4_cycles.c" -o "$out"
