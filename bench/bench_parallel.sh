#!/usr/bin/env bash
# Threads and ranks, side by side in one run (docs/parallel.md):
#   LeNet-5 and MLP W8A8 QAT training, --threads 2 against --threads 1;
#   the integer engine on LeNet-5 at batch 64, --threads 2 against 1;
#   LeNet-5 W8A8 QAT with global batch 64 on 2 MPI ranks against 1 process.
# Each pair alternates (one, two, one, two, ...) ROUNDS times and keeps each
# side's best: this machine is shared and its speed drifts. The load
# (uptime) is printed before and after; OPENBLAS_CORETYPE and OpenBLAS's
# kernel family with the figures.
#   bench/bench_parallel.sh [--accuracy] [BUILD_DIR] [DATA_DIR] [SAMPLES] [ROUNDS]
# --accuracy: instead, 5 epochs of LeNet-5 W8A8 QAT on all of MNIST, one
# process and 2 ranks (global batch 64), and their test accuracies.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
acc=0; if [ "${1:-}" = --accuracy ]; then acc=1; shift; fi
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-12800}; rounds=${4:-3}
bin=$build/tools/qat/qat
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# one machine: mpirun starts the ranks itself, no ssh/rsh agent needed
export OMPI_MCA_plm=isolated
have_mpi=0; command -v mpirun >/dev/null && have_mpi=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
field() { sed -nE "s/.*\"$1\": \"?([^,\"}]+)\"?.*/\1/p"; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "load before: $(uptime | sed 's/.*load/load/')"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, OpenBLAS kernels $("$bin" info 2>/dev/null | sed -n 's/^OpenBLAS core: *//p')"

if [ $acc = 1 ]; then
  common=(train --model lenet --qat --wbits 8 --abits 8 --epochs 5 --batch 64 --data "$data" --json)
  one=$("$bin" "${common[@]}" 2>/dev/null | tail -1)
  echo "1 process: test accuracy $(echo "$one" | field test_accuracy), $(echo "$one" | field train_samples_per_s) samples/s"
  if [ $have_mpi = 1 ]; then
    two=$(mpirun -np 2 --oversubscribe "$bin" "${common[@]}" 2>/dev/null | tail -1)
    echo "2 ranks:   test accuracy $(echo "$two" | field test_accuracy), $(echo "$two" | field train_samples_per_s) samples/s"
    awk -v a="$(echo "$one" | field test_accuracy)" -v b="$(echo "$two" | field test_accuracy)" \
      'BEGIN { printf "difference: %.2f points\n", 100 * (b - a) }'
  fi
  echo "load after: $(uptime | sed 's/.*load/load/')"
  exit 0
fi

train() { "$bin" train --qat --wbits 8 --abits 8 --epochs 1 --batch 64 --limit-train "$samples" --limit-test 200 \
  --data "$data" --json "$@" 2>/dev/null | tail -1 | field train_samples_per_s; }
for model in lenet mlp; do
  a=0; b=0
  for _ in $(seq "$rounds"); do
    a=$(max "$a" "$(train --model $model --threads 1)")
    b=$(max "$b" "$(train --model $model --threads 2)")
  done
  echo "$model W8A8 QAT training: --threads 1 $a samples/s, --threads 2 $b samples/s: $(ratio "$b" "$a")x"
done

"$bin" train --model lenet --qat --epochs 1 --limit-train 1280 --limit-test 100 --data "$data" \
  --out "$tmp/lenet.ckpt.h5" >/dev/null 2>&1
"$bin" export --checkpoint "$tmp/lenet.ckpt.h5" --out "$tmp/lenet.qat.h5" >/dev/null 2>&1
infer() { "$bin" eval --model "$tmp/lenet.qat.h5" --data "$data" --batch 64 --json "$@" 2>/dev/null | tail -1 |
  field infer_samples_per_s; }
a=0; b=0
for _ in $(seq "$rounds"); do
  a=$(max "$a" "$(infer --threads 1)"); b=$(max "$b" "$(infer --threads 2)")
done
echo "lenet integer engine, batch 64: --threads 1 $a samples/s, --threads 2 $b samples/s: $(ratio "$b" "$a")x"

if [ $have_mpi = 1 ]; then
  a=0; b=0
  for _ in $(seq "$rounds"); do
    a=$(max "$a" "$(train --model lenet)")
    b=$(max "$b" "$(mpirun -np 2 --oversubscribe "$bin" train --model lenet --qat --wbits 8 --abits 8 --epochs 1 \
      --batch 64 --limit-train "$samples" --limit-test 200 --data "$data" --json 2>/dev/null | tail -1 |
      field train_samples_per_s)")
  done
  echo "lenet W8A8 QAT, global batch 64: 1 process $a samples/s, 2 MPI ranks $b samples/s: $(ratio "$b" "$a")x"
else
  echo "bench: no mpirun: skipping the 2-rank comparison"
fi
echo "load after: $(uptime | sed 's/.*load/load/')"
