#!/usr/bin/env bash
# Int8 inference of the graph models, side by side in one run: qat's int
# engine against onnxruntime running qat's own ONNX export of each model
# (bench/ort_graph_infer.py: its QDQ graph fused into QLinearConv and the
# like, MLAS's int8 kernels; onnxruntime has no switch to cap its
# instruction set, so it runs only when QAT_MAX_ISA is unset) and against
# PyTorch's converted int8 model of the same
# architecture (bench/torch_graph_models.py reads the same models/*.qnet
# files; eager mode, QuantStub/DeQuantStub, FloatFunctional adds,
# prepare_qat + convert, the onednn and qnnpack engines), batch 64, one
# thread on both sides. Speed does not depend on the weights: each qat
# model comes from a one-epoch QAT run on 2048 images, exported; PyTorch's
# are untrained. This VM's speed drifts from minute to minute, so the two
# sides alternate, model by model, ROUNDS times, and each keeps its best
# (each run is itself the best of three passes over SAMPLES inputs).
#   bench/bench_graph_infer.sh [BUILD_DIR] [DATA_DIR] [SAMPLES] [ROUNDS] [MODELS...]
# QAT_BENCH_BACKENDS: PyTorch's two quantized engines to run (default
# onednn,qnnpack; a current PyTorch also has x86, its default, and fbgemm).
# Prints samples/s in wall time and in each side's thread CPU time (one
# thread each; the VM's other processes inflate wall time, CPU time far
# less), qat/torch, the fraction of this core's int8 peak each side
# reaches (multiply-adds per sample x samples/s over the peak that
# bench_vnni_peak measures: vpdpbusd zmm instructions/s x 64), the load
# average before and after, OPENBLAS_CORETYPE, qat's instruction-set level
# (QAT_MAX_ISA caps it; ONEDNN_MAX_CPU_ISA caps PyTorch's oneDNN) and integer kernel.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; data=${2:-$root/data/mnist}; samples=${3:-4096}; rounds=${4:-3}
shift $(($# < 4 ? $# : 4))
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(resnet8 ds-cnn mobilenet-v1 lenet mlp)
bin=$build/tools/qat/qat
for x in "$bin" "$build/bench/bench_infer" "$build/bench/bench_ops" "$build/bench/bench_vnni_peak"; do
  [ -x "$x" ] || { echo "bench: build first ($x missing)" >&2; exit 1; }
done
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# PyTorch: the current one from PyPI (.venv-bench/, scripts/setup-python.sh
# bench) when there, else Debian's python3-torch; QAT_BENCH_PYTHON overrides.
py=${QAT_BENCH_PYTHON:-}
[ -n "$py" ] || { [ -x "$root/.venv-bench/bin/python" ] && py=$root/.venv-bench/bin/python || py=/usr/bin/python3; }
have_torch=0 have_ort=0
"$py" -c "import torch" 2>/dev/null && have_torch=1
[ -z "${QAT_MAX_ISA:-}" ] && "$py" -c "import onnxruntime" 2>/dev/null && have_ort=1
backends=${QAT_BENCH_BACKENDS:-onednn,qnnpack}
b1=${backends%%,*} b2=${backends##*,}
[ $have_torch = 1 ] && torch_version=$("$py" -c "import torch; print(torch.__version__)") \
  || echo "bench: PyTorch not installed ($py; scripts/setup-python.sh bench): qat alone"
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)
for m in "${models[@]}"; do
  "$bin" train --model-file "$root/models/$m.qnet" --qat --epochs 1 --limit-train 2048 --limit-test 100 \
    --data "$data" --out "$tmp/$m.ckpt.h5" >/dev/null 2>&1
  "$bin" export --checkpoint "$tmp/$m.ckpt.h5" --out "$tmp/$m.qat.h5" --onnx "$tmp/$m.onnx" >/dev/null 2>&1
done
peak_line=$("$build/bench/bench_vnni_peak" 2)
peak=$(echo "$peak_line" | awk '$1 == "peak_gmacs" { print $2 }')
head_line=$("$build/bench/bench_infer" "$tmp/${models[0]}.qat.h5" 64 64 "" int | head -1)
kernel=$(echo "$head_line" | sed -nE 's/.*int kernel ([^,]+),.*/\1/p')
level=$(echo "$head_line" | sed -nE 's/.*, level ([^,]+),.*/\1/p')
core=$(echo "$head_line" | sed -nE 's/.*OPENBLAS_CORETYPE=([^ ]+).*/\1/p')
declare -A macs best_q best_o best_n cpu_q cpu_o cpu_n best_r cpu_r ops_r
for m in "${models[@]}"; do
  macs[$m]=$("$build/bench/bench_ops" "$tmp/$m.qat.h5" 64 1 | sed -nE 's/.*; ([0-9.]+) M multiply-adds\/sample.*/\1/p')
  best_q[$m]=0; best_o[$m]=0; best_n[$m]=0; cpu_q[$m]=0; cpu_o[$m]=0; cpu_n[$m]=0; best_r[$m]=0; cpu_r[$m]=0
done
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }
json() { echo "$1" | sed -nE "s/.*\"backend\": \"$2\".*\"$3\": ([0-9.]+).*/\1/p"; }
for round in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    out=$("$build/bench/bench_infer" "$tmp/$m.qat.h5" 64 "$samples" "$data" int)
    best_q[$m]=$(max "${best_q[$m]}" "$(echo "$out" | awk '$1 == "int" { print $2 }')")
    cpu_q[$m]=$(max "${cpu_q[$m]}" "$(echo "$out" | awk '$1 == "int" { sub(/\(/, "", $4); print $4 }')")
    if [ $have_ort = 1 ]; then
      r=$(cd "$root/bench" && "$py" ort_graph_infer.py "$tmp/$m.onnx" 64 "$samples" 3 2>/dev/null)
      best_r[$m]=$(max "${best_r[$m]}" "$(json "$r" ort infer_samples_per_s)")
      cpu_r[$m]=$(max "${cpu_r[$m]}" "$(json "$r" ort cpu_samples_per_s)")
      ops_r[$m]=$(echo "$r" | sed -nE 's/.*"ops": (\{[^}]*\}).*/\1/p')
      ort_version=$(echo "$r" | sed -nE 's/.*"onnxruntime": "([^"]+)".*/\1/p')
    fi
    [ $have_torch = 1 ] || continue
    t=$(cd "$root/bench" && "$py" torch_graph_models.py "$root/models/$m.qnet" 64 "$samples" "$b1,$b2" 3 2>/dev/null)
    best_o[$m]=$(max "${best_o[$m]}" "$(json "$t" "$b1" infer_samples_per_s)")
    best_n[$m]=$(max "${best_n[$m]}" "$(json "$t" "$b2" infer_samples_per_s)")
    cpu_o[$m]=$(max "${cpu_o[$m]}" "$(json "$t" "$b1" cpu_samples_per_s)")
    cpu_n[$m]=$(max "${cpu_n[$m]}" "$(json "$t" "$b2" cpu_samples_per_s)")
  done
done
echo "int8 inference, batch 64, 1 thread, $samples samples, best of $rounds alternating rounds (each the best of 3 passes)"
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1), model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1))"
echo "CPU: $cpu; qat level: $level (QAT_MAX_ISA=${QAT_MAX_ISA:-unset}), int kernel: $kernel; PyTorch ${torch_version:-none} ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset}"
echo "OPENBLAS_CORETYPE=$core; load average before: $load_before, after: $(load)"
echo "peak: $peak_line (vpdpbusd zmm: 64 int8 multiply-adds an instruction; GMAC/s = instructions/s x 64)"
echo "samples/s in wall time, then in the thread's CPU time (other processes on this VM inflate the first)"
printf "  %-13s %8s | %9s %9s %9s %8s %8s | %9s %9s %9s %8s %8s\n" model "MMAC/smp" "qat" "$b1" "$b2" "/$b1" "/$b2" \
  "qat cpu" "$b1" "$b2" "/$b1" "/$b2"
for m in "${models[@]}"; do
  awk -v m="$m" -v mac="${macs[$m]}" -v q="${best_q[$m]}" -v o="${best_o[$m]}" -v n="${best_n[$m]}" \
      -v cq="${cpu_q[$m]}" -v co="${cpu_o[$m]}" -v cn="${cpu_n[$m]}" -v p="$peak" -v b1="$b1" -v b2="$b2" 'BEGIN {
    r1 = (o > 0) ? q / o : 0; r2 = (n > 0) ? q / n : 0; r3 = (co > 0) ? cq / co : 0; r4 = (cn > 0) ? cq / cn : 0
    printf "  %-13s %8.2f | %9.0f %9.0f %9.0f %7.2fx %7.2fx | %9.0f %9.0f %9.0f %7.2fx %7.2fx\n", m, mac, q, o, n, r1, r2,
      cq, co, cn, r3, r4
    if (p > 0) printf "  %-13s fraction of peak, CPU time: qat %.1f%%, %s %.1f%%, %s %.1f%% (wall: %.1f%%, %.1f%%, %.1f%%)\n",
      "", 100 * cq * mac / 1e3 / p, b1, 100 * co * mac / 1e3 / p, b2, 100 * cn * mac / 1e3 / p,
      100 * q * mac / 1e3 / p, 100 * o * mac / 1e3 / p, 100 * n * mac / 1e3 / p
  }'
done
if [ $have_ort = 1 ]; then
  echo "onnxruntime ${ort_version:-?} (uncapped: it has no switch for its instruction set), qat's ONNX export of the same model:"
  printf "  %-13s | %9s %9s %8s | %9s %9s %8s | %s\n" model qat ort /ort "qat cpu" "ort cpu" /ort "ort's optimized graph"
  for m in "${models[@]}"; do
    awk -v m="$m" -v q="${best_q[$m]}" -v r="${best_r[$m]}" -v cq="${cpu_q[$m]}" -v cr="${cpu_r[$m]}" -v ops="${ops_r[$m]}" 'BEGIN {
      printf "  %-13s | %9.0f %9.0f %7.2fx | %9.0f %9.0f %7.2fx | %s\n", m, q, r, (r > 0) ? q / r : 0, cq, cr, (cr > 0) ? cq / cr : 0, ops
    }'
  done
elif [ -n "${QAT_MAX_ISA:-}" ]; then
  echo "onnxruntime: not run (QAT_MAX_ISA caps qat; onnxruntime cannot be capped)"
else
  echo "onnxruntime: not installed ($py; scripts/setup-python.sh bench)"
fi
