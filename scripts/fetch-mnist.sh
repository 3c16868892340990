#!/usr/bin/env bash
# Puts the four MNIST files (gzipped IDX) into DIR (default: data/mnist)
# and checks their MD5 sums. With QAT_MNIST_DIR set, copies them from that
# local directory instead of downloading.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/data/mnist}
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
declare -A md5=(
  [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c)
mirrors=(https://ossci-datasets.s3.amazonaws.com/mnist https://storage.googleapis.com/cvdf-datasets/mnist)
# ok FILE NAME: FILE exists and has the MD5 sum MNIST publishes for NAME
ok() { [ -f "$1" ] && [ "$(md5sum "$1" | cut -d' ' -f1)" = "${md5[$2]}" ]; }
# have_downloader: curl or wget is installed
have_downloader() { command -v curl >/dev/null 2>&1 || command -v wget >/dev/null 2>&1; }
mkdir -p "$dest"
for f in "${files[@]}"; do
  ok "$dest/$f" "$f" && continue
  tmp="$dest/.$f.part"
  if [ -n "${QAT_MNIST_DIR:-}" ]; then
    [ -f "$QAT_MNIST_DIR/$f" ] || { echo "fetch-mnist: $QAT_MNIST_DIR/$f not found (QAT_MNIST_DIR)" >&2; exit 1; }
    cp "$QAT_MNIST_DIR/$f" "$tmp"
  else
    have_downloader || { echo "fetch-mnist: neither curl nor wget is installed: install one (scripts/setup-deps.sh installs curl, or apt-get install curl ca-certificates), or set QAT_MNIST_DIR to a directory that holds the four MNIST .gz files" >&2; exit 1; }
    got=0
    for m in "${mirrors[@]}"; do
      echo "fetch-mnist: downloading $m/$f" >&2
      if curl -fsSL --retry 2 -o "$tmp" "$m/$f" 2>/dev/null || wget -q -O "$tmp" "$m/$f" 2>/dev/null; then got=1; break; fi
    done
    [ $got = 1 ] || { rm -f "$tmp"; echo "fetch-mnist: could not download $f; set QAT_MNIST_DIR to a directory that holds the MNIST .gz files" >&2; exit 1; }
  fi
  ok "$tmp" "$f" || { rm -f "$tmp"; echo "fetch-mnist: $f has the wrong MD5 sum (damaged or not MNIST)" >&2; exit 1; }
  mv "$tmp" "$dest/$f"   # atomic: a half-copied file never has the real name
done
echo "fetch-mnist: MNIST ready in $dest" >&2
