#!/usr/bin/env bash
# qat train on your own data, through the program:
#  - MNIST as IDX, as an HDF5 file and as a .npy directory (converted by
#    qat_data_convert) trains to the same weights, bit for bit;
#  - eval --outputs writes every sample's output integers as .npy, and the
#    int engine's predictions match them;
#  - Ctrl-C (SIGINT) saves --out atomically and says how to resume; the
#    resumed run ends bit-identical to one that never stopped;
#  - bad data sets (NaN, labels past the model's classes, a sample shape
#    the model does not take, a missing split, N of x and y apart, an
#    unsupported dtype, Fortran order, a truncated .npy, a file that is not
#    HDF5): one line naming the fault, exit 2, nothing written.
#
#   train_data.sh QAT_BIN QAT_DATA_CONVERT CKPT_CMP MNIST_DIR PYTHON
set -euo pipefail
bin=$1 convert=$2 cmp=$3 mnist=$4 py=$5
work=$(mktemp -d /tmp/qat-train-data-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--model lenet --qat --epochs 1 --limit-train 1000 --limit-test 200 --seed 3)

# ---- the same weights from three formats --------------------------------------------------
"$convert" "$mnist" "$work/mnist.h5" >/dev/null
"$convert" "$mnist" "$work/npy" >/dev/null
for f in idx h5 npy; do
  case $f in idx) d=$mnist ;; h5) d=$work/mnist.h5 ;; npy) d=$work/npy ;; esac
  "$bin" train --data "$d" "${common[@]}" --out "$work/$f.ckpt.h5" 2>"$work/$f.err" >/dev/null ||
    { cat "$work/$f.err"; fail "train on $f"; }
  grep -q "^qat: data $d ($([ $f = h5 ] && echo hdf5 || echo $f))" "$work/$f.err" || fail "$f: the data line: $(head -3 "$work/$f.err")"
done
"$cmp" "$work/idx.ckpt.h5" "$work/h5.ckpt.h5" >/dev/null || fail "IDX and HDF5 trained to different weights"
"$cmp" "$work/idx.ckpt.h5" "$work/npy.ckpt.h5" >/dev/null || fail "IDX and .npy trained to different weights"
echo "IDX, HDF5 and .npy: the same weights, bit for bit"

# ---- eval --outputs and --predictions --------------------------------------------------------
"$bin" export --checkpoint "$work/idx.ckpt.h5" --out "$work/m.qat.h5" 2>/dev/null
"$bin" eval --model "$work/m.qat.h5" --data "$work/npy" --limit-test 300 --outputs "$work/out.npy" \
  --predictions "$work/pred.txt" --json > "$work/eval.json" 2>/dev/null || fail "eval --outputs"
"$py" - "$work/out.npy" "$work/pred.txt" <<'EOF' || fail "eval --outputs: the integers do not give the predictions"
import sys, numpy as np
out = np.load(sys.argv[1])
pred = np.loadtxt(sys.argv[2], dtype=np.int64)
assert out.dtype == np.int32 and out.shape == (300, 10), (out.dtype, out.shape)
assert (out.argmax(axis=1) == pred).all()
assert out.min() >= -128 and out.max() <= 127
EOF
echo "eval --outputs: [300, 10] int32, argmax = the predictions"

# ---- Ctrl-C saves; the resume ends where a run that never stopped ends ------------------------
long=(--model lenet --qat --epochs 2 --limit-train 12000 --limit-test 200 --seed 5 --data "$mnist")
"$bin" train "${long[@]}" --out "$work/straight.ckpt.h5" >/dev/null 2>&1
"$bin" train "${long[@]}" --out "$work/int.ckpt.h5" >/dev/null 2>"$work/int.err" &
pid=$!
for _ in $(seq 100); do grep -q "epoch 1/2" "$work/int.err" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
kill -INT "$pid"; kill -INT "$pid" # one Ctrl-C delivered twice (to the process and its group): still one request
rc=0; wait "$pid" || rc=$?
[ "$rc" = 130 ] || { cat "$work/int.err"; fail "SIGINT: exit $rc, want 130"; }
grep -q "interrupted at step [0-9]*; wrote $work/int.ckpt.h5: continue with the same command and --resume" "$work/int.err" ||
  fail "SIGINT: the message: $(tail -2 "$work/int.err")"
ls "$work"/.int.ckpt.h5.qat-tmp.* >/dev/null 2>&1 && fail "SIGINT left a temporary file"
"$bin" train "${long[@]}" --out "$work/int.ckpt.h5" --resume "$work/int.ckpt.h5" >/dev/null 2>"$work/res.err" ||
  { cat "$work/res.err"; fail "resume after SIGINT"; }
"$cmp" "$work/straight.ckpt.h5" "$work/int.ckpt.h5" >/dev/null || fail "interrupted + resumed differs from straight"
echo "SIGINT: saved $(grep -o 'at step [0-9]*' "$work/int.err" | head -1), resumed bit-identical"
# a second Ctrl-C more than a second after the first quits at once, unsaved; with --json, stdout still
# ends with the error line (a step of 2048 samples through 64-channel convolutions: seconds long)
printf 'input shape=1,28,28\nconv2d a input out=64 kernel=3 pad=1\nrelu r a\nconv2d b r out=64 kernel=3 pad=1\nglobal_avgpool g b\nlinear fc g out=10\n' \
  > "$work/slow.qnet"
"$bin" train --model "$work/slow.qnet" --data "$mnist" --limit-train 2048 --batch 2048 --epochs 1 --json \
  --out "$work/twice.ckpt.h5" >"$work/twice.out" 2>"$work/twice.err" &
pid=$!
for _ in $(seq 200); do grep -q "thread(s)" "$work/twice.err" 2>/dev/null && break; sleep 0.05; done
sleep 0.3; kill -INT "$pid"; sleep 1.3; kill -INT "$pid" 2>/dev/null || true
rc=0; wait "$pid" || rc=$?
if grep -q "quitting at once" "$work/twice.err"; then
  [ "$rc" = 130 ] || fail "a second SIGINT: exit $rc, want 130"
  [ "$(tail -1 "$work/twice.out")" = '{"error": "quit at once: nothing saved since the last checkpoint", "status": 130}' ] ||
    fail "a second SIGINT: stdout ends with: $(tail -1 "$work/twice.out")"
  [ -e "$work/twice.ckpt.h5" ] && fail "a second SIGINT wrote a checkpoint"
  echo "SIGINT twice: quit at once, --json's last line says so"
else # the step ended within 1.3 s on this machine: the first request was served, saved
  [ "$rc" = 130 ] && grep -q "interrupted at step" "$work/twice.err" || { cat "$work/twice.err"; fail "SIGINT: exit $rc"; }
  echo "SIGINT twice: skipped, a step took under 1.3 s here"
fi

# ---- bad data sets: one line, exit 2, nothing written -----------------------------------------
mk() { "$py" - "$@" <<'EOF'
import os, sys, numpy as np
kind, d = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
r = np.random.default_rng(1)
x = r.random((40, 1, 28, 28), dtype=np.float32); y = (np.arange(40) % 10).astype(np.int64)
xt, yt = x[:20].copy(), y[:20].copy()
if kind == "nan": x[17, 0, 3, 4] = np.nan
if kind == "label": y[23] = 12
if kind == "shape": x = r.random((40, 1, 20, 20), dtype=np.float32); xt = x[:20].copy()
if kind == "count": y = y[:39]
if kind == "dtype": x = x.astype(np.float16)
save = lambda n, a: np.save(os.path.join(d, n), a)
save("train_x.npy", np.asfortranarray(x) if kind == "fortran" else x); save("train_y.npy", y)
if kind != "split": save("test_x.npy", xt); save("test_y.npy", yt)
if kind == "truncated":
    p = os.path.join(d, "train_x.npy"); b = open(p, "rb").read(); open(p, "wb").write(b[:len(b) - 100])
EOF
}
check() { # KIND EXPECTED-TEXT
  mk "$1" "$work/bad-$1"
  rc=0; "$bin" train --data "$work/bad-$1" --model lenet --epochs 1 --out "$work/bad.ckpt.h5" >/dev/null 2>"$work/bad.err" || rc=$?
  [ "$rc" = 2 ] || { cat "$work/bad.err"; fail "$1: exit $rc, want 2"; }
  [ "$(grep -vc '^qat: data ' "$work/bad.err")" = 1 ] || { cat "$work/bad.err"; fail "$1: more than one line"; }
  grep -q -- "$2" "$work/bad.err" || fail "$1: want \"$2\", got: $(cat "$work/bad.err")"
  [ -e "$work/bad.ckpt.h5" ] && fail "$1: wrote a checkpoint"
  echo "bad data ($1): $(grep -v '^qat: data ' "$work/bad.err")"
}
check nan "row 17"
check label "label 12 at row 23"
check shape "\[1, 20, 20\]"
check split "test"
check count "40"
check dtype "float16"
check fortran "Fortran"
check truncated "train_x.npy"
printf 'not an HDF5 file at all\n' > "$work/bad.h5"
rc=0; "$bin" train --data "$work/bad.h5" --epochs 1 >/dev/null 2>"$work/bad.err" || rc=$?
[ "$rc" = 2 ] || { cat "$work/bad.err"; fail "not HDF5: exit $rc, want 2"; }
echo "bad data (not HDF5): $(cat "$work/bad.err")"
# ---- eval reads the split it measures, checks the layout; outputs never over inputs ------------
"$py" - "$work/hwc" <<'EOF2'
import os, sys, numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
r = np.random.default_rng(2)
y = (np.arange(200) % 3).astype(np.int64)
x = r.integers(0, 60, (200, 8, 8, 3)).astype(np.uint8)
for i in range(200): x[i, :, :, y[i]] += 150          # the class is the bright channel
np.save(f"{d}/train_x.npy", x); np.save(f"{d}/train_y.npy", y)
np.save(f"{d}/test_x.npy", x[:60]); np.save(f"{d}/test_y.npy", y[:60])
EOF2
printf 'input shape=3,8,8\nconv2d c input out=4 kernel=3 pad=1\nrelu r c\nglobal_avgpool g r\nlinear fc g out=3\n' > "$work/hwc.qnet"
"$bin" train --data "$work/hwc" --channels-last --model "$work/hwc.qnet" --qat --epochs 2 --out "$work/hwc.ckpt.h5" \
  >/dev/null 2>&1 || fail "train on a channels-last set"
"$bin" export --checkpoint "$work/hwc.ckpt.h5" --out "$work/hwc.qat.h5" 2>/dev/null
"$bin" eval --model "$work/hwc.qat.h5" --data "$work/hwc" --channels-last >/dev/null 2>&1 || fail "eval --channels-last"
rc=0; "$bin" eval --model "$work/hwc.qat.h5" --data "$work/hwc" >/dev/null 2>"$work/hwc.err" || rc=$?
[ "$rc" = 2 ] && grep -q "the data's samples are \[8, 8, 3\], the model's input is \[3, 8, 8\].*--channels-last" "$work/hwc.err" ||
  fail "eval of a channels-last set without the flag: exit $rc, $(cat "$work/hwc.err")"
echo "eval: a set in another layout is refused: $(grep -o "the data's samples.*" "$work/hwc.err" | cut -c1-80)"
# a NaN in train does not stop the evaluation of test, which is read alone (its random 0..1 floats are
# not in the units of a model trained on bytes: the units check is not what this looks at)
mk nan "$work/nan-eval"
"$bin" train --data "$work/npy" "${common[@]}" --limit-train 200 --out "$work/small.ckpt.h5" >/dev/null 2>&1
"$bin" export --checkpoint "$work/small.ckpt.h5" --out "$work/small.qat.h5" 2>/dev/null
"$bin" eval --model "$work/small.qat.h5" --data "$work/nan-eval" --no-units-check >/dev/null 2>&1 ||
  fail "eval read the train split"
# ---- data in other units than the model's: refused (exit 2) by eval, analyze and a resumed run ----
"$py" - "$work/npy" "$work/f01" <<'EOF2'
import os, sys, numpy as np
src, d = sys.argv[1], sys.argv[2]; os.makedirs(d, exist_ok=True)
for s in ("train", "test"):   # the same images as 0..1 floats, and as floats 0..255
    x, y = np.load(f"{src}/{s}_x.npy")[:500], np.load(f"{src}/{s}_y.npy")[:500]
    for k, v in ((d, x / 255.0), (d + "-255", x)):
        os.makedirs(k, exist_ok=True)
        np.save(f"{k}/{s}_x.npy", v.astype(np.float32)); np.save(f"{k}/{s}_y.npy", y)
EOF2
units() { # WHAT EXIT ARGS...
  local what=$1 want=$2; shift 2
  rc=0; "$bin" "$@" >/dev/null 2>"$work/units.err" || rc=$?
  [ "$rc" = "$want" ] || { cat "$work/units.err"; fail "units, $what: exit $rc, want $want"; }
  [ "$want" = 0 ] && return
  grep -q "channel 0 of the data has mean .* (values in 0..1 where the model takes raw bytes 0..255.*--no-units-check" \
    "$work/units.err" || fail "units, $what: $(cat "$work/units.err")"
}
units eval 2 eval --model "$work/small.qat.h5" --data "$work/f01"
units "eval --no-units-check" 0 eval --model "$work/small.qat.h5" --data "$work/f01" --no-units-check
units "eval, floats 0..255" 0 eval --model "$work/small.qat.h5" --data "$work/f01-255"
units analyze 2 analyze --checkpoint "$work/small.ckpt.h5" --data "$work/f01" --limit-test 100
units "train --init" 2 train --data "$work/f01" "${common[@]}" --init "$work/small.ckpt.h5" --out "$work/u.ckpt.h5"
units "train --resume" 2 train --data "$work/f01" "${common[@]}" --limit-train 200 --epochs 2 --resume "$work/small.ckpt.h5" \
  --out "$work/u.ckpt.h5"
[ -e "$work/u.ckpt.h5" ] && fail "units: a refused run wrote a checkpoint"
# a refused --init leaves its --log as it was; --no-units-check changes nothing else (the checkpoint's
# normalization, made from 200 samples, is kept, not made again from these 400)
printf 'step,kept\n1,2\n' > "$work/keep.csv"
units "train --init --log" 2 train --data "$work/f01" "${common[@]}" --init "$work/small.ckpt.h5" --log "$work/keep.csv"
[ "$(cat "$work/keep.csv")" = "$(printf 'step,kept\n1,2')" ] || fail "units: a refused run touched its --log"
for flag in "" --no-units-check; do
  "$bin" train --data "$work/npy" "${common[@]}" --limit-train 400 --init "$work/small.ckpt.h5" $flag \
    --out "$work/init$flag.ckpt.h5" >/dev/null 2>&1 || fail "train --init $flag"
done
"$cmp" "$work/init.ckpt.h5" "$work/init--no-units-check.ckpt.h5" >/dev/null || fail "units: --no-units-check changed an --init run"
echo "units: 0..1 floats refused for a model trained on bytes (eval, analyze, --init, --resume)"
# outputs over inputs
cp "$work/mnist.h5" "$work/copy.h5"
rc=0; "$bin" train --data "$work/copy.h5" --epochs 1 --limit-train 64 --out "$work/copy.h5" >/dev/null 2>"$work/ow.err" || rc=$?
[ "$rc" = 2 ] && grep -q "would write into the data set" "$work/ow.err" || fail "train --out over its data: exit $rc"
"$convert" "$work/copy.h5" - >/dev/null 2>&1 || fail "the data set was damaged"
rc=0; "$bin" eval --model "$work/m.qat.h5" --data "$work/npy" --outputs "$work/m.qat.h5" >/dev/null 2>"$work/ow.err" || rc=$?
[ "$rc" = 2 ] && grep -q "is one of this command's inputs" "$work/ow.err" || fail "eval --outputs over the model: exit $rc"
# outputs into a data set's directory (one of its files, or a new file beside them) are refused,
# and the files stay as they were
cp -r "$work/npy" "$work/npy-copy"; mkdir "$work/idx-copy"; cp "$mnist"/*-ubyte* "$work/idx-copy/"
before=$(cat "$work/npy-copy"/* "$work/idx-copy"/* | cksum)
for args in "train --data $work/npy-copy --epochs 1 --limit-train 64 --log $work/npy-copy/train_x.npy" \
            "train --data $work/npy-copy --epochs 1 --limit-train 64 --out $work/npy-copy/test_y.npy" \
            "train --data $work/npy-copy --epochs 1 --limit-train 64 --best-out $work/npy-copy/best.npy --val 0.1" \
            "train --data $work/idx-copy --epochs 1 --limit-train 64 --log $work/idx-copy/t10k-labels-idx1-ubyte.gz" \
            "eval --model $work/m.qat.h5 --data $work/npy-copy --outputs $work/npy-copy/test_x.npy" \
            "eval --model $work/m.qat.h5 --data $work/npy-copy --predictions $work/npy-copy/p.npy"; do
  rc=0; (cd "$work" && "$bin" $args >/dev/null 2>"$work/ow.err") || rc=$?
  [ "$rc" = 2 ] && grep -q "would write into the data set" "$work/ow.err" || fail "$args: exit $rc, $(cat "$work/ow.err")"
done
ln -s npy-copy/test_y.npy "$work/to-data.npy"; ln -s "$work/npy-copy/new.csv" "$work/to-new.csv"  # a write follows links
for out in to-data.npy to-new.csv; do
  rc=0; (cd "$work" && "$bin" train --data npy-copy --epochs 1 --limit-train 64 --log "$out" >/dev/null 2>"$work/ow.err") || rc=$?
  [ "$rc" = 2 ] && grep -q "would write into the data set" "$work/ow.err" || fail "--log $out (a link into the data): exit $rc"
done
rc=0; (cd "$work/npy-copy" && "$bin" train --data . --epochs 1 --limit-train 64 --log run.csv >/dev/null 2>"$work/ow.err") || rc=$?
[ "$rc" = 2 ] && grep -q "would write into the data set" "$work/ow.err" || fail "train --data . --log run.csv: exit $rc"
[ "$(cat "$work/npy-copy"/* "$work/idx-copy"/* | cksum)" = "$before" ] || fail "a data set's directory was written to"
echo "outputs over inputs: refused"
echo "train_data: ok"
