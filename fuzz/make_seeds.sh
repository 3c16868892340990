#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora into OUT/<target>/ (default
# fuzz/seeds, the committed ones):
#   idx         tiny IDX files written byte by byte: valid ones of 1 to 4
#               dimensions, plain and gzipped, and edge cases (two gzip
#               members, cut, trailing bytes, a header promising 2 GiB...)
#   checkpoint  training checkpoints from qat-mnist: LeNet W8A8 QAT, LeNet
#               float, the MLP W8A8 QAT, LeNet-BN QAT (one epoch over 256 samples)
#   qnet        model files (docs/model-format.md): the reference models
#               (models/*.qnet), the graph with every op kind, and small edge
#               cases (an input line alone, a 1-d input, an output line,
#               padded non-square windows, a concat of three)
#   qmodel      their quantized exports (qat-mnist export) in the current
#               format, as NAME-v3.h5 (one with 4-bit sub-channel weights in
#               blocks of 16, packed, ragged blocks), and those of the
#               residual and depthwise reference models (models/resnet8.qnet,
#               models/ds-cnn.qnet). The committed *-v1.h5 and *-v2.h5 seeds
#               are exports in the older formats 1 (before the graph IR) and
#               2 (before sub-channel weights), which the loader still reads,
#               kept as they are (test_hostile mutates lenet-w8a8-v1.h5);
#               this script does not write them.
# Files over 200 KB are written only with --all: every checkpoint is (the
# LeNet parameters alone are 247 KB), so the committed corpus has none and
# scripts/fuzz.sh makes them in build-fuzz/ with --all before fuzzing.
# Files over 1 MiB (the MLP checkpoint, 2.8 MB) are never kept: libFuzzer
# cuts its inputs to 1 MiB unless told otherwise, and a cut HDF5 file is
# just a damaged one.
#   fuzz/make_seeds.sh [--all] [OUT]
#   QAT_MNIST_BIN  qat-mnist (default build/examples/mnist/qat-mnist, made by scripts/test.sh)
#   QAT_MNIST_DIR  the MNIST .gz files (default data/mnist)
# Seeds are named *.h5, not *.ckpt.h5 / *.qat.h5, which .gitignore hides.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all=0
[ "${1:-}" = --all ] && { all=1; shift; }
out=${1:-$root/fuzz/seeds}
bin=${QAT_MNIST_BIN:-$root/build/examples/mnist/qat-mnist}
data=${QAT_MNIST_DIR:-$root/data/mnist}
limit=$((200 * 1024))
mkdir -p "$out/idx" "$out/checkpoint" "$out/qmodel" "$out/qnet"

# ---- IDX: bytes by hand (printf's \ooo octal escapes) --------------------------
idx() { printf "$2" > "$out/idx/$1"; }
gz() { gzip -n -9 -c "$out/idx/$1" > "$out/idx/$2"; }   # -n: no name or time, same bytes every run
idx u8-1d      '\0\0\010\001\0\0\0\003\001\002\003'
idx u8-2d      '\0\0\010\002\0\0\0\002\0\0\0\003abcdef'
idx u8-3d      '\0\0\010\003\0\0\0\002\0\0\0\002\0\0\0\002\000\001\002\003\004\005\006\007'
idx u8-4d      '\0\0\010\004\0\0\0\001\0\0\0\002\0\0\0\001\0\0\0\002\011\011\012\012'
idx labels-1d  '\0\0\010\001\0\0\0\012\000\001\002\003\004\005\006\007\010\011'
gz u8-1d u8-1d.gz
gz u8-3d u8-3d.gz
gz u8-4d u8-4d.gz
# one file in two gzip members (the header, then the payload): valid
{ head -c 12 "$out/idx/u8-2d" | gzip -n -c; tail -c +13 "$out/idx/u8-2d" | gzip -n -c; } > "$out/idx/two-members.gz"
idx cut-payload     '\0\0\010\002\0\0\0\002\0\0\0\003abc'
idx trailing-byte   '\0\0\010\001\0\0\0\001xy'
idx promise-2gib    '\0\0\010\003\0\0\100\0\0\0\100\0\0\0\0\010'
idx dim-zero        '\0\0\010\001\0\0\0\0'
idx float-type      '\0\0\015\001\0\0\0\001\0\0\0\0'
idx five-dims       '\0\0\010\005\0\0\0\001\0\0\0\001\0\0\0\001\0\0\0\001\0\0\0\001a'
idx empty           ''
cp "$out/idx/u8-3d.gz" "$out/idx/gz-trailing-garbage.gz"; printf 'junk' >> "$out/idx/gz-trailing-garbage.gz"
head -c 20 "$out/idx/u8-3d.gz" > "$out/idx/gz-cut.gz"

# ---- model files -----------------------------------------------------------------
for f in "$root"/models/*.qnet; do cp "$f" "$out/qnet/$(basename "$f")"; done
# the every-op graph of tests/test_util.h (QAT_TEST_EVERY_OP), as a file
sed -n '/^#define QAT_TEST_EVERY_OP/,/^$/p' "$root/tests/test_util.h" | sed -n 's/^ *"\(.*\)\\n" *\\\{0,1\}$/\1/p' > "$out/qnet/every-op.qnet"
printf 'input shape=3,8,8\n' > "$out/qnet/input-only.qnet"
printf 'input shape=20\nlinear a input out=8 bias=false\nrelu6 r a\nlinear b r out=4\nsigmoid s b\noutput b\n' > "$out/qnet/vector.qnet"
printf 'input shape=2,9,7\nconv2d c input out=4 kernel=3x2 stride=2x1 pad=1x2 groups=2\nbatchnorm n c momentum=0.2 eps=1e-3\navgpool2d p n kernel=2x3 stride=1x2 pad=1x1\nmaxpool2d q n kernel=3 stride=2 pad=1\nglobal_avgpool g q\ndropout d g p=0.25\nlinear l d out=3\n' > "$out/qnet/windows.qnet"
printf 'input shape=1,6,6\nconv2d a input out=2 kernel=1\nconv2d b input out=3 kernel=1\nhardswish h input\nconcat c a,b,h\ntanh t c\nadd s t,t\nflatten f s\nlinear l f out=2\n' > "$out/qnet/concat3.qnet"

# ---- checkpoints and quantized models, from qat-mnist --------------------------
if [ ! -x "$bin" ] || [ ! -d "$data" ]; then
  echo "make_seeds: $bin or $data missing (scripts/test.sh builds and fetches them): IDX seeds only" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# keep FILE TARGET NAME: copy a seed in if it is small enough (or --all)
keep() {
  local size; size=$(stat -c %s "$1")
  if [ "$size" -gt $((1024 * 1024)) ]; then echo "make_seeds: $2/$3 is $size bytes, over 1 MiB: not kept" >&2
  elif [ "$all" = 1 ] || [ "$size" -le "$limit" ]; then cat "$1" > "$out/$2/$3"   # not cp: the export is 0600
  else echo "make_seeds: $2/$3 is $size bytes, over 200 KB: not kept (--all keeps it)" >&2; fi
}
train() {  # NAME ARGS...: 256 samples, one epoch, then the quantized export when --qat
  local name=$1; shift
  "$bin" train --data "$data" --limit-train 256 --limit-test 100 --epochs 1 --seed 1 \
    --out "$tmp/$name.ckpt.h5" "$@" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
  keep "$tmp/$name.ckpt.h5" checkpoint "$name.h5"
  case " $* " in *" --qat "*)
    "$bin" export --checkpoint "$tmp/$name.ckpt.h5" --out "$tmp/$name.qat.h5" > "$tmp/$name.log" 2>&1 \
      || { cat "$tmp/$name.log" >&2; exit 1; }
    keep "$tmp/$name.qat.h5" qmodel "$name-v3.h5" ;;
  esac
}
train lenet-w8a8 --model lenet --qat
train lenet-w4a4-tensor --model lenet --qat --wbits 4 --abits 4 --granularity tensor
train lenet-w4a8-block16 --model lenet --qat --wbits 4 --abits 8 --granularity block:16  # packed, sub-channel, ragged
train lenet-float --model lenet
train resnet8-w8a8 --model-file "$root/models/resnet8.qnet" --qat
train ds-cnn-w8a8 --model-file "$root/models/ds-cnn.qnet" --qat
if [ "$all" = 1 ]; then  # over 200 KB whatever happens: only for --all
  train mlp-w8a8 --model mlp --qat
  train lenet-bn-w8a8 --model lenet-bn --qat --freeze-bn 2
fi
echo "make_seeds: seeds in $out" >&2
