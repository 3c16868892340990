#!/usr/bin/env bash
# The TFLite bar on every model of models/ (ctest tflite_models): each is
# trained briefly with W8A8 QAT and --target tflite, exported to .qat.h5
# and .tflite from one checkpoint, and the .tflite file run by TFLite's
# interpreter with its reference kernels (ai-edge-litert, .venv/) on the
# test split; every output integer must equal qat's integer engine's
# (tests/tflite/tfl_compare.py). The default interpreter (XNNPACK) runs
# too; its differences are printed, not failed on (docs/tflite.md). Then
# TFLite Micro's interpreter (tflite-micro, .venv/) runs the first 500
# samples one at a time: every output integer must equal the engine's too
# (tests/tflite/tflm_compare.py, which also prints TFLite Micro's arena).
#
#   models.sh QAT_BIN TFLITE_IO_BIN MNIST_DIR [SAMPLES]
#
# The 28x28 models train on MNIST, the others on small seeded sets of
# their shapes (tests/tflite/make_sets.py). SAMPLES (default 1000): test
# samples compared per model (0: the whole test split).
# QAT_TFLITE_MODELS picks models (default: all of models/, and the tool's
# built-in LeNet and MLP as builtin:lenet, builtin:mlp).
# Needs QAT_PYTHON with ai-edge-litert (scripts/setup-python.sh): without
# it the test fails, it never skips.
set -euo pipefail
bin=$1 io=$2 mnist=$3 samples=${4:-1000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${QAT_PYTHON:-$root/.venv/bin/python}
"$py" -c "import ai_edge_litert, tflite_micro" 2>/dev/null ||
  { echo "FAIL: $py lacks ai_edge_litert or tflite_micro: run scripts/setup-python.sh (it makes .venv/ from PyPI)"; exit 1; }
work=$(mktemp -d /tmp/qat-tflite-models-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" "$here/make_sets.py" "$work/sets"
[ "$samples" = 0 ] && samples=1000000
fail=0
models=${QAT_TFLITE_MODELS:-$(cd "$root/models" && ls *.qnet | sed 's/\.qnet$//') builtin:lenet builtin:mlp}
for m in $models; do
  case $m in
    resnet8-ic) data=$work/sets/ic train=(--epochs 1) ;;
    ds-cnn-kws) data=$work/sets/kws train=(--epochs 1) ;;
    ae-ad) data=$work/sets/ad train=(--epochs 1) ;;
    mobilenet-v1-vww) data=$work/sets/vww train=(--epochs 1) ;;
    *) data=$mnist train=(--epochs 1 --limit-train 2048 --limit-test 200) ;;
  esac
  model=(--model-file "$root/models/$m.qnet")
  case $m in builtin:*) model=(--model "${m#builtin:}") m=${m/:/-} ;; esac
  "$bin" train "${model[@]}" --qat --target tflite "${train[@]}" --data "$data" \
    --out "$work/$m.ckpt.h5" >/dev/null 2>"$work/$m.train.log" || { echo "== $m: training failed"; cat "$work/$m.train.log"; fail=1; continue; }
  "$bin" export --checkpoint "$work/$m.ckpt.h5" --out "$work/$m.qat.h5" --tflite "$work/$m.tflite" 2>"$work/$m.export.log" ||
    { echo "== $m: export failed"; cat "$work/$m.export.log"; fail=1; continue; }
  "$io" "$work/$m.qat.h5" "$data" test "$samples" "$work/$m.in.npy" "$work/$m.out.npy" 2>/dev/null ||
    { echo "== $m: tflite_io failed"; fail=1; continue; }
  rc=0
  said=$("$py" "$here/tfl_compare.py" "$work/$m.tflite" "$work/$m.in.npy" "$work/$m.out.npy" --default 2>&1) || rc=$?
  echo "== $m: $(echo "$said" | grep -v '^{\|^INFO' | tr '\n' ';')"
  [ $rc = 0 ] || fail=1
  rc=0
  said=$("$py" "$here/tflm_compare.py" "$work/$m.tflite" "$work/$m.in.npy" "$work/$m.out.npy" 500 2>&1) || rc=$?
  echo "   $m: $(echo "$said" | grep -v '^{' | tr '\n' ';')"
  [ $rc = 0 ] || fail=1
done
[ $fail = 0 ] && echo "TFLite's and TFLite Micro's reference kernels equal the int engine on every model" || echo "FAIL: see above"
exit $fail
