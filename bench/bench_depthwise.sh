#!/usr/bin/env bash
# Depthwise 3x3 convolution forward + backward, qat vs PyTorch 1.13's
# conv2d(..., groups=C), side by side in one run: [64, 64, 14, 14] and
# [64, 128, 7, 7], batch 64, one thread (torch.set_num_threads(1)).
# Reports OPENBLAS_CORETYPE and the kernel family OpenBLAS chose on each
# side (neither side's depthwise convolution calls OpenBLAS: PyTorch's
# runs on oneDNN). This machine's speed drifts from minute to minute:
# each side runs ROUNDS times (default 3), alternating, and keeps its best.
#   bench/bench_depthwise.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}; rounds=${2:-3}
bin=$build/bench/bench_depthwise
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then env_core="(unset)"; else env_core="\"$OPENBLAS_CORETYPE\""; fi
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
# qat's lines: "  qat [64, 64, 14, 14]: forward F samples/s, forward+backward B samples/s"
qat_field() { echo "$1" | awk -v s="$2" -v k="$3" 'index($0, s) { for (i = 1; i <= NF; i++) if ($i == k) { v = $(i + 1); sub(/,/, "", v); print v } }'; }
torch_field() { echo "$1" | sed -nE "s/.*\"$2\": ([0-9.e+]+).*/\1/p"; }
declare -A best
for k in q14f q14b q7f q7b t14f t14b t7f t7b; do best[$k]=0; done
core=unknown; tcore=unknown
for round in $(seq "$rounds"); do
  q=$("$bin")
  core=$(echo "$q" | sed -nE 's/.*OpenBLAS core ([^,]+),.*/\1/p')
  best[q14f]=$(max "${best[q14f]}" "$(qat_field "$q" "[64, 64, 14, 14]" forward)")
  best[q14b]=$(max "${best[q14b]}" "$(qat_field "$q" "[64, 64, 14, 14]" forward+backward)")
  best[q7f]=$(max "${best[q7f]}" "$(qat_field "$q" "[64, 128, 7, 7]" forward)")
  best[q7b]=$(max "${best[q7b]}" "$(qat_field "$q" "[64, 128, 7, 7]" forward+backward)")
  [ $have_torch = 1 ] || continue
  t=$(cd "$root/bench" && /usr/bin/python3 torch_depthwise.py)
  tcore=$(echo "$t" | sed -nE 's/.*"blas_core": "([^"]+)".*/\1/p')
  best[t14f]=$(max "${best[t14f]}" "$(torch_field "$t" 64x64x14x14_forward)")
  best[t14b]=$(max "${best[t14b]}" "$(torch_field "$t" 64x64x14x14_fwd_bwd)")
  best[t7f]=$(max "${best[t7f]}" "$(torch_field "$t" 64x128x7x7_forward)")
  best[t7b]=$(max "${best[t7b]}" "$(torch_field "$t" 64x128x7x7_fwd_bwd)")
done
echo "depthwise 3x3, stride 1, padding 1, bias; batch 64, 1 thread, best of $rounds alternating rounds"
echo "OPENBLAS_CORETYPE=$env_core; OpenBLAS core: qat $core, torch $tcore; samples/s"
for s in 14 7; do
  [ $s = 14 ] && shape="[64, 64, 14, 14]" || shape="[64, 128, 7, 7]"
  line=$(printf "  %-17s qat forward %7.0f, fwd+bwd %7.0f" "$shape" "${best[q${s}f]}" "${best[q${s}b]}")
  if [ $have_torch = 1 ]; then
    line="$line$(awk -v a="${best[t${s}f]}" -v b="${best[t${s}b]}" -v c="${best[q${s}f]}" -v d="${best[q${s}b]}" \
      'BEGIN { printf " | torch forward %7.0f, fwd+bwd %7.0f | qat/torch %.2fx, %.2fx", a, b, c / a, d / b }')"
  fi
  echo "$line"
done
