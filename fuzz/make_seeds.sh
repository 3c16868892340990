#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora into OUT/<target>/ (default
# fuzz/seeds, the committed ones):
#   idx         tiny IDX files written byte by byte: valid ones of 1 to 4
#               dimensions, plain and gzipped, and edge cases (two gzip
#               members, cut, trailing bytes, a header promising 2 GiB...)
#   checkpoint  training checkpoints from qat: LeNet W8A8 QAT, LeNet
#               float, the MLP W8A8 QAT, LeNet-BN QAT (one epoch over 256 samples)
#   qnet        model files (docs/model-format.md): the reference models
#               (models/*.qnet), the graph with every op kind, and small edge
#               cases (an input line alone, a 1-d input, an output line,
#               padded non-square windows, a concat of three)
#   qmodel      their quantized exports (qat export) in the current
#               format, as NAME-v3.h5 (one with 4-bit sub-channel weights in
#               blocks of 16, packed, ragged blocks; two with compact block
#               scales, 4-bit sub-scales packed and 7-bit ones), and those of the
#               residual and depthwise reference models (models/resnet8.qnet,
#               models/ds-cnn.qnet), and LeNet W4A4 rounding once (version 5,
#               *-single-v5.h5). The committed *-v1.h5 and *-v2.h5 seeds
#               are exports in the older formats 1 (before the graph IR) and
#               2 (before sub-channel weights), which the loader still reads,
#               kept as they are (test_hostile mutates lenet-w8a8-v1.h5);
#               this script does not write them.
#   npy         a selector byte (which file of fuzz_npy's valid set the rest
#               replaces: 0 train_x, 1 train_y, 2 test_x, 3 test_y, 4
#               test_anomaly) and a .npy file written byte by byte: valid
#               ones (versions 1.0, 2.0, 3.0; uint8, int64, float32,
#               float64) and edge cases (Fortran order, big-endian, cut,
#               NaN, a negative label, a flag of 2...)
#   log         training logs (qat train --log, read by qat plot): a
#               regression's by hand (an empty line, CRLF), a classifier's
#               from qat and the same without the mse_ columns (an older log)
#   h5data      HDF5 data sets made by qat_data_convert from small .npy sets
#               (uint8 with labels and anomaly flags, chunked, float x with
#               float targets, one over fuzz_h5data's 4 KiB cap); skipped
#               when build/tests/qat_data_convert is missing
# Files over 200 KB are written only with --all: every checkpoint is (the
# LeNet parameters alone are 247 KB), so the committed corpus has none and
# scripts/fuzz.sh makes them in build-fuzz/ with --all before fuzzing.
# Files over 1 MiB (the MLP checkpoint, 2.8 MB) are never kept: libFuzzer
# cuts its inputs to 1 MiB unless told otherwise, and a cut HDF5 file is
# just a damaged one.
#   fuzz/make_seeds.sh [--all] [OUT]
#   QAT_BIN  qat (default build/tools/qat/qat, made by scripts/test.sh)
#   QAT_MNIST_DIR  the MNIST .gz files (default data/mnist)
# Seeds are named *.h5, not *.ckpt.h5 / *.qat.h5, which .gitignore hides.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all=0
[ "${1:-}" = --all ] && { all=1; shift; }
out=${1:-$root/fuzz/seeds}
bin=${QAT_BIN:-$root/build/tools/qat/qat}
data=${QAT_MNIST_DIR:-$root/data/mnist}
limit=$((200 * 1024))
mkdir -p "$out/idx" "$out/checkpoint" "$out/qmodel" "$out/npy" "$out/h5data" "$out/qnet" "$out/log"

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

# ---- .npy: headers by hand (the dict padded to 64 bytes, '\n' last) -------------
# bytes N EXPR: N bytes, byte i = EXPR (in i), as printf octal escapes
bytes() { local i; for ((i = 0; i < $1; i++)); do printf '\\%03o' $(( ($2) & 255 )); done; }
# npyfile OUT DESCR SHAPE PAYLOAD(printf escapes) [MAJOR [FORTRAN]]
npyfile() {
  local major=${5:-1} fortran=${6:-False} pre=10
  [ "$major" = 1 ] || pre=12
  local dict="{'descr': '$2', 'fortran_order': $fortran, 'shape': $3, }"
  local pad=$(( (64 - (pre + ${#dict} + 1) % 64) % 64 ))
  local hlen=$(( ${#dict} + pad + 1 ))
  { printf '\223NUMPY'; printf "\\$(printf %03o "$major")\\000"
    printf "\\$(printf %03o $((hlen & 255)))\\$(printf %03o $((hlen >> 8)))"
    [ "$pre" = 12 ] && printf '\000\000'
    printf '%s' "$dict"; printf "%${pad}s" ''; printf '\n'; printf "$4"; } > "$1"
}
# seed NAME SELECTOR NPYARGS...: the selector byte, then the file
seed() {
  local name=$1 sel=$2; shift 2
  npyfile "$out/npy/.tmp" "$@"
  { printf "\\$(printf %03o "$sel")"; cat "$out/npy/.tmp"; } > "$out/npy/$name"
  rm -f "$out/npy/.tmp"
}
x72=$(bytes 72 'i * 37')
f1='\000\000\200\077'          # 1.0f
fnan='\000\000\300\177'        # NaN
seed x-u8           0 '|u1' '(6, 2, 2, 3)' "$x72"
seed x-u8-v2        0 '|u1' '(6, 2, 2, 3)' "$x72" 2
seed x-u8-v3        0 '<u1' '(6, 2, 2, 3)' "$x72" 3
seed x-i8-rank2     0 '|i1' '(6, 12)' "$x72"
seed x-f4           0 '<f4' '(6, 2, 2, 3)' "$(for i in $(seq 72); do printf '%s' "$f1"; done)"
seed x-f4-nan       0 '<f4' '(6, 2, 2, 3)' "$(for i in $(seq 71); do printf '%s' "$f1"; done)$fnan"
seed x-f8           0 '<f8' '(6, 12)' "$(bytes 576 'i % 8 == 7 ? 63 : 0')"
seed x-fortran      0 '|u1' '(6, 2, 2, 3)' "$x72" 1 True
seed x-bigendian    0 '>f4' '(6, 2, 2, 3)' "$(for i in $(seq 72); do printf '%s' '\077\200\000\000'; done)"
seed x-cut          0 '|u1' '(6, 2, 2, 3)' "$(bytes 71 'i')"
seed x-7rows        0 '|u1' '(7, 2, 2, 3)' "$(bytes 84 'i')"
seed x-int16        0 '<i2' '(6, 2, 2, 3)' "$(bytes 144 'i')"
seed x-scalar       0 '|u1' '()' '\001'
seed y-u8           1 '|u1' '(6,)' "$(bytes 6 'i % 4')"
seed y-i8-negative  1 '<i8' '(6,)' "$(bytes 48 'i == 47 ? 255 : (i % 8 ? 0 : 1)')"
seed y-u8-2d        1 '|u1' '(6, 2)' "$(bytes 12 'i')"
seed y-f4-targets   1 '<f4' '(6, 2)' "$(for i in $(seq 12); do printf '%s' "$f1"; done)"
seed testx-u8       2 '|u1' '(4, 2, 2, 3)' "$(bytes 48 'i * 5')"
seed testx-other    2 '|u1' '(4, 3, 2, 2)' "$(bytes 48 'i * 5')"
seed testy-i8       3 '<i8' '(4,)' "$(bytes 32 'i % 8 ? 0 : i / 8')"
seed testy-u64-huge 3 '<u8' '(4,)' "$(bytes 32 '255')"
seed anomaly-u8     4 '|u1' '(4,)' '\000\001\001\000'
seed anomaly-two    4 '|u1' '(4,)' '\000\002\001\000'
seed anomaly-short  4 '|u1' '(3,)' '\000\001\001'

# ---- HDF5 data sets: small .npy sets converted by qat_data_convert ---------------
conv=${QAT_DATA_CONVERT:-$root/build/tests/qat_data_convert}
if [ -x "$conv" ]; then
  sets=$(mktemp -d)
  # set DIR TRAIN_X_ARGS(descr shape payload) TEST_X_ARGS TRAIN_Y_ARGS TEST_Y_ARGS [ANOMALY_PAYLOAD]
  mkset() {
    local d=$sets/$1; mkdir -p "$d"
    npyfile "$d/train_x.npy" "$2" "$3" "$4"; npyfile "$d/test_x.npy" "$2" "$5" "$6"
    npyfile "$d/train_y.npy" "$7" "$8" "$9"; npyfile "$d/test_y.npy" "$7" "${10}" "${11}"
    [ -n "${12:-}" ] && npyfile "$d/test_anomaly.npy" '|u1' "${10}" "${12}"
    return 0
  }
  mkset u8 '|u1' '(6, 2, 2, 3)' "$x72" '(4, 2, 2, 3)' "$(bytes 48 'i * 5')" '|u1' '(6,)' "$(bytes 6 'i % 4')" \
    '(4,)' "$(bytes 4 'i')" '\000\001\001\000'
  mkset f4 '<f4' '(6, 3)' "$(for i in $(seq 18); do printf '%s' "$f1"; done)" '(2, 3)' \
    "$(for i in $(seq 6); do printf '%s' "$f1"; done)" '<f4' '(6, 2)' "$(for i in $(seq 12); do printf '%s' "$f1"; done)" \
    '(2, 2)' "$(for i in $(seq 4); do printf '%s' "$f1"; done)"
  mkset stream '|u1' '(64, 1, 8, 8)' "$(bytes 4096 'i * 13')" '(8, 1, 8, 8)' "$(bytes 512 'i')" '<i8' '(64,)' \
    "$(bytes 512 'i % 8 ? 0 : (i / 8) % 10')" '(8,)' "$(bytes 64 'i % 8 ? 0 : 1')"
  "$conv" "$sets/u8" "$out/h5data/u8.h5" 2>/dev/null
  "$conv" --chunk-rows 2 "$sets/u8" "$out/h5data/u8-chunked.h5" 2>/dev/null
  "$conv" "$sets/f4" "$out/h5data/f4-targets.h5" 2>/dev/null
  "$conv" "$sets/stream" "$out/h5data/stream-4k.h5" 2>/dev/null
  "$conv" --chunk-rows 16 "$sets/stream" "$out/h5data/stream-4k-chunked.h5" 2>/dev/null
  rm -rf "$sets"
else
  echo "make_seeds: $conv missing (build the tests first): no HDF5 data-set seeds" >&2
fi

# ---- model files -----------------------------------------------------------------
for f in "$root"/models/*.qnet; do cp "$f" "$out/qnet/$(basename "$f")"; done
# the every-op graph of tests/test_util.h (QAT_TEST_EVERY_OP), as a file
sed -n '/^#define QAT_TEST_EVERY_OP/,/^$/p' "$root/tests/test_util.h" | sed -n 's/^ *"\(.*\)\\n" *\\\{0,1\}$/\1/p' > "$out/qnet/every-op.qnet"
printf 'input shape=3,8,8\n' > "$out/qnet/input-only.qnet"
printf 'input shape=20\nlinear a input out=8 bias=false\nrelu6 r a\nlinear b r out=4\nsigmoid s b\noutput b\n' > "$out/qnet/vector.qnet"
printf 'input shape=2,9,7\nconv2d c input out=4 kernel=3x2 stride=2x1 pad=1x2 groups=2\nbatchnorm n c momentum=0.2 eps=1e-3\navgpool2d p n kernel=2x3 stride=1x2 pad=1x1\nmaxpool2d q n kernel=3 stride=2 pad=1\nglobal_avgpool g q\ndropout d g p=0.25\nlinear l d out=3\n' > "$out/qnet/windows.qnet"
printf 'input shape=1,6,6\nconv2d a input out=2 kernel=1\nconv2d b input out=3 kernel=1\nhardswish h input\nconcat c a,b,h\ntanh t c\nadd s t,t\nflatten f s\nlinear l f out=2\n' > "$out/qnet/concat3.qnet"

# ---- training logs (qat plot's reader): a regression's by hand, with an
# empty line and CRLF line ends (a classifier's comes from qat below) ---------------
h='kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,acc_float,acc_fake_quant,acc_int'
printf '%s,mse_float,mse_fake_quant,mse_int,input.min,input.max,input.scale\nstep,2,0.5,1.2,0.001,900.5,0,0,,,,,,,,,\n\r\nepoch,4,1,1.1,,,1,0,,,,1.3,1.25,1.26,-3,3,0.0235\r\n' \
  "$h" > "$out/log/regression.csv"

# ---- checkpoints and quantized models, from qat --------------------------
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
# a classifier's training log, and the same as qat wrote it before the mse_ columns
"$bin" train --data "$data" --model mlp --qat --float-epochs 1 --epochs 1 --limit-train 320 --limit-test 100 \
  --log "$out/log/classify.csv" --log-every 2 > "$tmp/log.log" 2>&1 || { cat "$tmp/log.log" >&2; exit 1; }
cut -d, -f1-11,15- "$out/log/classify.csv" > "$out/log/classify-before-mse.csv"
train lenet-w4a4-tensor --model lenet --qat --wbits 4 --abits 4 --granularity tensor
# the same program rounding its requantization once: version 5, requant_rounding
"$bin" export --checkpoint "$tmp/lenet-w4a4-tensor.ckpt.h5" --out "$tmp/single.qat.h5" --rounding single \
  > "$tmp/single.log" 2>&1 || { cat "$tmp/single.log" >&2; exit 1; }
keep "$tmp/single.qat.h5" qmodel lenet-w4a4-tensor-single-v5.h5
train lenet-w4a8-block16 --model lenet --qat --wbits 4 --abits 8 --granularity block:16  # packed, sub-channel, ragged
train lenet-w4a8-block16-u4 --model lenet --qat --wbits 4 --abits 8 --granularity block:16 --block-scales u4  # compact
train lenet-w8a8-block8-u7 --model lenet --qat --abits 8 --granularity block:8 --block-scales u7  # compact, a byte each
train lenet-float --model lenet
train resnet8-w8a8 --model-file "$root/models/resnet8.qnet" --qat
train ds-cnn-w8a8 --model-file "$root/models/ds-cnn.qnet" --qat
if [ "$all" = 1 ]; then  # over 200 KB whatever happens: only for --all
  train mlp-w8a8 --model mlp --qat
  train lenet-bn-w8a8 --model lenet-bn --qat --freeze-bn 2
fi
echo "make_seeds: seeds in $out" >&2
