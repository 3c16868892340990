#!/usr/bin/env bash
# Training speed of LeNet and the MLP, qat against every PyTorch on the
# machine (Debian's 1.13 and the current one from PyPI), side by side in
# one run: same models, batch 64, one thread, Adam, real MNIST (SAMPLES of
# it). Float training, and with --qat W8A8 QAT against PyTorch's eager-mode
# QAT (prepare_qat, default QAT qconfig).
#   bench/bench_mnist_train.sh [--qat] [BUILD_DIR] [DATA_DIR] [SAMPLES] [ROUNDS]
# This machine's speed drifts from minute to minute: the sides alternate,
# ROUNDS times (default 3), and each reports its min and median samples/s
# and peak RSS. The first line says the machine, its ISA and the date.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
qat=(); mode=float
if [ "${1:-}" = --qat ]; then qat=(--qat --wbits 8 --abits 8); mode=qat; shift; fi
build=${1:-$root/build}; data=$(cd "${2:-$root/data/mnist}" && pwd); samples=${3:-20000}; rounds=${4:-3}
bin=$build/tools/qat/qat
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
. "$root/bench/bench_common.sh"
export OPENBLAS_NUM_THREADS=1
mapfile -t peers < <(torch_peers "$root")
bench_header
echo "batch 64, 1 thread, $samples samples, Adam ${qat[*]:-float}; qat's level: $("$bin" info 2>/dev/null |
  sed -n 's/^active level: *//p') (QAT_MAX_ISA=${QAT_MAX_ISA:-unset})"
[ ${#peers[@]} -gt 0 ] || echo "bench: no PyTorch (python3-torch, or scripts/setup-python.sh bench): qat alone"
field() { sed -nE "s/.*\"$1\": \"?([^,\"}]+)\"?.*/\1/p"; }
for model in lenet mlp; do
  declare -A rate=() rss=()
  for round in $(seq "$rounds"); do
    j=$("$bin" train "${qat[@]}" --model "$model" --data "$data" --epochs 2 --limit-train "$samples" --limit-test 1000 \
         --json 2>/dev/null | tail -1)
    rate[qat]+="$(echo "$j" | field train_samples_per_s) "; rss[qat]+="$(echo "$j" | field peak_rss_mib) "
    for k in "${!peers[@]}"; do
      t=$("${peers[$k]}" "$root/bench/torch_mnist_train.py" "$data" 64 "$samples" "$model" "$mode" 2>/dev/null)
      rate[$k]+="$(echo "$t" | field train_samples_per_s) "; rss[$k]+="$(echo "$t" | field peak_rss_mib) "
    done
  done
  peer_lines "$model"
  unset rate rss
done
