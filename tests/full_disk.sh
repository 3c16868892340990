#!/usr/bin/env bash
# Saving onto a full disk, for real: mounts a 64 KiB tmpfs (a LeNet
# checkpoint is ~790 KB, its export ~106 KB, its C source ~330 KB) and has
# qat save into it. Each save must fail cleanly: exit status 1, no
# crash, no HDF5 error dump, one line that names the file and the reason,
# the old file there kept byte for byte, no temporary file left
# (docs/saving.md). For `export --c DIR` the three old files (model.h,
# model.c, model_io.c) must all stay, model.h included (it fits, but is
# not replaced alone); and `export --out F --c DIR` leaves F too.
#
#   tests/full_disk.sh QAT_BIN MNIST_DIR
#
# Needs root and a working `mount`; otherwise exits 77, which CTest
# reports as skipped (SKIP_RETURN_CODE 77).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 QAT_BIN MNIST_DIR" >&2
  exit 2
fi
bin=$1 data=$2
export OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" -ne 0 ] || ! command -v mount >/dev/null; then
  echo "full_disk: skipped (needs root and mount)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/qat-full-XXXXXX")
mnt=$work/mnt
mkdir "$mnt"
if ! mount -t tmpfs -o size=64k qat-full-disk "$mnt" 2>/dev/null; then
  rm -rf "$work"
  echo "full_disk: skipped (cannot mount a tmpfs here)"
  exit 77
fi
trap 'umount "$mnt"; rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# Checks one failed save: $1 exit status, $2 the target, $3 the lines of
# stderr to judge (the error line alone), $4 the whole stderr, then other
# files that must have kept their old contents too.
check() {
  local status=$1 target=$2 lines=$3 all=$4
  local want="qat: $target: cannot write: No space left on device"
  [ "$status" -eq 1 ] || fail "$target: exit status $status, want 1 (139 = segfault)"
  grep -qiE 'HDF5|#0[0-9]+:|major:|minor:' "$all" && fail "$target: HDF5 printed its error stack"
  [ "$(wc -l <"$lines")" -eq 1 ] || fail "$target: $(wc -l <"$lines") lines on stderr, want 1"
  [ "$(cat "$lines")" = "$want" ] || fail "$target: got \"$(head -1 "$lines")\", want \"$want\""
  for kept in "$target" "${@:5}"; do
    cmp -s "$work/$(basename "$kept").old" "$kept" || fail "$kept: the old file was not kept"
  done
  [ "$(ls -A "$mnt" | grep -vcxE 'x\.ckpt\.h5|e\.qat\.h5|model\.h|model\.c|model_io\.c')" -eq 0 ] ||
    fail "$target: files left: $(ls -A "$mnt" | tr '\n' ' ')"
  echo "$target: exit $status, stderr: $(cat "$lines")"
}

# An old file at the target (something small enough to fit), and a copy to compare with.
old_file() {
  head -c 8000 /dev/urandom >"$1"
  cp "$1" "$work/$(basename "$1").old"
}

# train: start-up lines (model, quantization, a BLAS note) and progress
# come before the save; every other line counts.
T=$mnt/x.ckpt.h5
old_file "$T"
"$bin" train --data "$data" --model lenet --qat --limit-train 256 --limit-test 10 --epochs 1 --save-every 1 \
  --out "$T" >/dev/null 2>"$work/train.err"
status=$?
grep -vE '^qat: (lenet|mlp|lenet-bn), |^qat: data |^qat: fake quantization on: |^qat: note: |^epoch ' \
  "$work/train.err" >"$work/train.lines"
check "$status" "$T" "$work/train.lines" "$work/train.err"

# export prints nothing else: its whole stderr is the one line.
"$bin" train --data "$data" --model lenet --qat --limit-train 256 --limit-test 10 --epochs 1 \
  --out "$work/c.ckpt.h5" >/dev/null 2>&1 || fail "cannot make a checkpoint"
E=$mnt/e.qat.h5
old_file "$E"
"$bin" export --checkpoint "$work/c.ckpt.h5" --out "$E" >/dev/null 2>"$work/export.err"
check $? "$E" "$work/export.err" "$work/export.err"

# export --c: model.h (1.5 KB) would fit, model.c (330 KB) cannot; all three old files stay
for f in model.h model.c model_io.c; do old_file "$mnt/$f"; done
"$bin" export --checkpoint "$work/c.ckpt.h5" --c "$mnt" >/dev/null 2>"$work/c.err"
check $? "$mnt/model.c" "$work/c.err" "$work/c.err" "$mnt/model.h" "$mnt/model_io.c"

# several targets: the quantized model (106 KB) fails first, so nothing is replaced, the C files included
"$bin" export --checkpoint "$work/c.ckpt.h5" --out "$E" --c "$mnt" >/dev/null 2>"$work/multi.err"
check $? "$E" "$work/multi.err" "$work/multi.err" "$mnt/model.h" "$mnt/model.c" "$mnt/model_io.c"

[ "$failures" -eq 0 ] && echo "full_disk: passed" || echo "full_disk: $failures failure(s)"
[ "$failures" -eq 0 ]
