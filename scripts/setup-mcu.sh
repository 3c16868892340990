#!/usr/bin/env bash
# Installs what the cross-architecture tests and benchmarks need
# (tests/mcu, tests/aarch64, bench/bench_mcu.sh): Debian's Arm bare-metal
# compiler with newlib and qemu-system-arm for the MPS2 boards; the
# aarch64 Linux cross compiler and qemu-user (qemu-aarch64). Without them
# those tests report themselves skipped. Then the qemu plugin header of the
# cycle estimates (scripts/fetch-qemu-plugin-header.sh, into .deps/). As
# root: apt-get; otherwise sudo; otherwise a message.
set -euo pipefail
pkgs=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
root=$(cd "$(dirname "$0")/.." && pwd)
header() {
  bash "$root/scripts/fetch-qemu-plugin-header.sh" "$root/.deps/qemu-plugin" ||
    echo "setup-mcu: no qemu plugin header: the Cortex-M4 cycle estimates will say n/a" >&2
}
if [ ${#missing[@]} -eq 0 ]; then header; exit 0; fi
echo "setup-mcu: installing ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
  echo "setup-mcu: missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
header
