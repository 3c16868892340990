#!/usr/bin/env bash
# QAT training speed and memory of the graph reference models (models/*.qnet),
# qat against every PyTorch on the machine (Debian's 1.13 and the current
# one from PyPI, eager QAT: prepare_qat, the default QAT qconfig), side by
# side in one run: the same architectures (the PyTorch side reads the same
# .qnet files), batch 64, one thread, Adam, W8A8, real MNIST (SAMPLES of it).
#   bench/bench_graph_train.sh [BUILD_DIR] [DATA_DIR] [SAMPLES] [MODELS] [ROUNDS]
# MODELS: comma-separated names under models/ (default resnet8,ds-cnn,mobilenet-v1).
# This machine's speed drifts from minute to minute: the sides alternate,
# ROUNDS times (default 3), and each reports its min and median samples/s,
# and its peak RSS. The first line says the machine, its ISA and the date.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:-$root/build}; data=$(cd "${2:-$root/data/mnist}" && pwd); samples=${3:-3200}
models=${4:-resnet8,ds-cnn,mobilenet-v1}; rounds=${5:-3}
bin=$build/tools/qat/qat
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
. "$root/bench/bench_common.sh"
export OPENBLAS_NUM_THREADS=1
mapfile -t peers < <(torch_peers "$root")
bench_header
echo "batch 64, 1 thread, $samples samples, Adam, W8A8 QAT; qat's level: $("$bin" info 2>/dev/null | sed -n 's/^active level: *//p') (QAT_MAX_ISA=${QAT_MAX_ISA:-unset})"
[ ${#peers[@]} -gt 0 ] || echo "bench: no PyTorch (python3-torch, or scripts/setup-python.sh bench): qat alone"
field() { sed -nE "s/.*\"$1\": \"?([^,\"}]+)\"?.*/\1/p"; }
for model in ${models//,/ }; do
  file=$root/models/$model.qnet
  [ -f "$file" ] || { echo "bench: no model file $file" >&2; exit 1; }
  declare -A rate=() rss=()
  for round in $(seq "$rounds"); do
    # two epochs over the samples: qat reports the rate of the whole run, so
    # the first (warm-up) epoch is in it, as PyTorch's is not
    j=$("$bin" train --qat --wbits 8 --abits 8 --model-file "$file" --data "$data" --epochs 2 \
         --limit-train "$samples" --limit-test 1000 --json 2>/dev/null | tail -1)
    rate[qat]+="$(echo "$j" | field train_samples_per_s) "; rss[qat]+="$(echo "$j" | field peak_rss_mib) "
    for k in "${!peers[@]}"; do
      t=$(cd "$root/bench" && "${peers[$k]}" torch_graph_train.py "$file" "$data" 64 "$samples" qat 2>/dev/null)
      rate[$k]+="$(echo "$t" | field train_samples_per_s) "; rss[$k]+="$(echo "$t" | field peak_rss_mib) "
    done
  done
  peer_lines "$model"
  unset rate rss
done
