#!/usr/bin/env bash
# Fetches qemu-plugin.h, the TCG plugin API of the installed qemu-system-arm,
# from Debian's source package of that same version (Debian ships the
# plugin-enabled binary but no header): apt-get source, with its signature
# checks, into a private apt state (the machine's apt configuration is not
# touched), then the one header out of the upstream tarball. The cycle-pricing
# plugin (bench/m4cycles) is built against it.
#   fetch-qemu-plugin-header.sh [DEST_DIR]    -> DEST_DIR/qemu-plugin.h
# DEST_DIR defaults to the repository's .deps/qemu-plugin, where CMake
# looks for it (QAT_QEMU_PLUGIN_INCLUDE).
# Exit 77 when qemu-system-arm is not installed; 1 when the download fails.
set -euo pipefail
dest=${1:-$(cd "$(dirname "$0")/.." && pwd)/.deps/qemu-plugin}
ver=$(dpkg-query -W -f='${source:Version}' qemu-system-arm 2>/dev/null) || {
  echo "fetch-qemu-plugin-header: qemu-system-arm is not installed (scripts/setup-mcu.sh)" >&2; exit 77; }
[ -n "$ver" ] || { echo "fetch-qemu-plugin-header: no qemu-system-arm version" >&2; exit 77; }
if [ -f "$dest/qemu-plugin.h" ] && [ "$(cat "$dest/version" 2>/dev/null)" = "$ver" ]; then exit 0; fi
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
cat > "$tmp/sources.list" <<LIST
deb-src http://deb.debian.org/debian $codename main
deb-src http://deb.debian.org/debian $codename-updates main
deb-src http://deb.debian.org/debian-security $codename-security main
LIST
apt=(apt-get -qq -o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User="$(id -un)")
"${apt[@]}" update >/dev/null
(cd "$tmp/src" && "${apt[@]}" source --download-only "qemu=$ver" >/dev/null)
orig=$(ls "$tmp"/src/qemu_*.orig.tar.* | head -1)
tar -xf "$orig" -C "$tmp/src" --wildcards '*/include/qemu/qemu-plugin.h'
mkdir -p "$dest"
# renamed into place: tests running side by side may fetch at once
cp "$tmp"/src/qemu-*/include/qemu/qemu-plugin.h "$dest/.qemu-plugin.h.$$"
echo "$ver" > "$dest/.version.$$"
mv -f "$dest/.qemu-plugin.h.$$" "$dest/qemu-plugin.h"
mv -f "$dest/.version.$$" "$dest/version"
echo "fetch-qemu-plugin-header: qemu-plugin.h of qemu $ver in $dest" >&2
