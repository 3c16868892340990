#!/usr/bin/env bash
# Fake quantization over 4 M floats, qat vs PyTorch 1.13, side by side in
# one run (one thread, best of 10 each): forward, and forward + backward
# for an activation and for a weight. Run twice in alternation (the
# machine's speed drifts). Without python3-torch the comparison is skipped.
# Ends with bench_fq_ceiling: the same memory traffic with no arithmetic,
# the most any implementation of the op could do on this machine.
#   bench/bench_fake_quant.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bin=$build/bench/bench_fake_quant
[ -x "$bin" ] || { echo "bench: build first ($bin missing)" >&2; exit 1; }
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench: PyTorch (python3-torch) not installed: skipping the comparison"
for pass in 1 2; do
  echo "== pass $pass"
  ours=$("$bin")
  echo "$ours"
  [ $have_torch = 1 ] || continue
  theirs=$(/usr/bin/python3 "$root/bench/torch_fake_quant.py")
  # columns of ours: forward, activation, weight
  echo "$ours" | awk -v j="$theirs" '
    function get(k,   m) { match(j, "\"" k "\": [0-9.e-]+"); m = substr(j, RSTART, RLENGTH); sub(/.*: /, "", m); return m + 0 }
    /per-tensor|per-channel/ {
      k = ($1 == "per-tensor") ? "per_tensor" : "per_channel"
      f = get(k "_forward"); a = get(k "_fwd_bwd_activation"); w = get(k "_fwd_bwd_weight")
      printf "  torch %-11s forward %.3f, fwd+bwd activation %.3f, weight %.3f G/s; qat is %.1fx, %.1fx, %.1fx\n", $1, f, a, w, $2 / f, $3 / a, $4 / w
    }'
done
if [ -x "$build/bench/bench_fq_ceiling" ]; then
  echo "== the memory ceiling"
  "$build/bench/bench_fq_ceiling"
fi
