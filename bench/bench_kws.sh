#!/usr/bin/env bash
# The keyword-spotting bar: qat against PyTorch on a generated KWS-like set
# (scripts/make-synthetic.py kws: 12 classes of noisy 49x10 feature maps)
# with MLPerf Tiny's DS-CNN (models/ds-cnn-kws.qnet), the same epochs, batch
# 64, Adam with the cosine schedule, one thread, W8A8 QAT:
#   - `qat train --qat` and PyTorch eager QAT (bench/torch_graph_train.py,
#     the same .qnet file; converted to int8 on --engine) side by side,
#     ROUNDS interleaved rounds (the order alternates each round): min and
#     median training samples/s and peak RSS of each;
#   - qat's integer accuracy (`qat export`, then `qat eval`, int engine)
#     against PyTorch's converted int8 model's, on the whole test split;
#   - the exported C (`qat export --c`), compiled on the host with
#     tests/mcu/host_main.c and fed the first C_SAMPLES raw test samples:
#     its output integers against the integer engine's (`qat eval --outputs`);
#   - a linear model on the raw values, trained by qat in float with the
#     same recipe: how far the set is from linearly separable.
# The bars: qat's int accuracy >= torch's int8 accuracy; qat's samples/s
# >= 2x torch's.
#
#   bench/bench_kws.sh [--build DIR] [--work DIR] [--train N] [--test N] [--epochs N]
#                      [--rounds R] [--lr X] [--engine E] [--c-samples N] [--seed S] [--full]
# Defaults (a short run, 4 to 5 minutes on this 2-core machine): 6000
# training and 2000 test samples, 3 epochs, 3 rounds, lr 0.003, engine x86,
# 300 samples through the C. --full: 12000 and 3000 samples, 10 epochs
# (about 25 minutes: PyTorch takes three quarters of it).
# Needs the build (build/tools/qat/qat) and .venv-bench (scripts/setup-python.sh
# bench: torch, numpy, h5py); work files go to WORK (default out/bench-kws).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build work=$root/out/bench-kws
n_train=6000 n_test=2000 epochs=3 rounds=3 lr=0.003 engine=x86 c_samples=300 seed=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --train) n_train=$2; shift 2 ;;
    --test) n_test=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --c-samples) c_samples=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --full) n_train=12000 n_test=3000 epochs=10; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "bench_kws: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
bin=$build/tools/qat/qat
py=$root/.venv-bench/bin/python
model=$root/models/ds-cnn-kws.qnet
[ -x "$bin" ] || { echo "bench_kws: build first ($bin missing)" >&2; exit 1; }
[ -x "$py" ] || { echo "bench_kws: no $py (scripts/setup-python.sh bench)" >&2; exit 1; }
mkdir -p "$work" && work=$(cd "$work" && pwd) # absolute: the Python side runs from bench/
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
source "$root/bench/bench_common.sh"

bench_header "$py"
# the generator's hash in the name: a changed generator never reuses an old set
data=$work/kws-$n_train-$n_test-s$seed-$(md5sum "$root/scripts/make-synthetic.py" | cut -c1-8)
[ -f "$data/train_x.npy" ] || "$py" "$root/scripts/make-synthetic.py" kws "$data" --train "$n_train" --test "$n_test" \
  --seed "$seed" >/dev/null
echo "set: scripts/make-synthetic.py kws, $n_train train / $n_test test samples, seed $seed; $(basename "$model"), $epochs epochs, batch 64, Adam lr $lr cosine, 1 thread, W8A8"

# ---- training speed, interleaved rounds --------------------------------------------------
common=(--seed "$seed" --epochs "$epochs" --batch 64 --lr "$lr" --optimizer adam --schedule cosine --threads 1)
run_qat() { # $1: round
  "$bin" train --data "$data" --model "$model" --qat --wbits 8 --abits 8 "${common[@]}" \
    --out "$work/qat-r$1.ckpt.h5" --json 2>"$work/qat-r$1.log" | tail -1 > "$work/qat-r$1.json" ||
    { echo "bench_kws: qat train failed:" >&2; tail -3 "$work/qat-r$1.log" >&2; exit 1; }
}
run_torch() {
  (cd "$root/bench" && "$py" torch_graph_train.py "$model" --data "$data" --epochs "$epochs" --batch 64 --lr "$lr" \
    --seed "$seed" --engine "$engine") > "$work/torch-r$1.json" 2>"$work/torch-r$1.log" ||
    { echo "bench_kws: torch failed:" >&2; tail -3 "$work/torch-r$1.log" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run_qat "$r"; run_torch "$r"; else run_torch "$r"; run_qat "$r"; fi
done
qat_rates=$(for r in $(seq "$rounds"); do jget "$work/qat-r$r.json" train_samples_per_s; done)
torch_rates=$(for r in $(seq "$rounds"); do jget "$work/torch-r$r.json" train_samples_per_s; done)
qat_rss=$(for r in $(seq "$rounds"); do jget "$work/qat-r$r.json" peak_rss_mib; done | stat_max)
torch_rss=$(for r in $(seq "$rounds"); do jget "$work/torch-r$r.json" peak_rss_mib; done | stat_max)
torch_base=$(jget "$work/torch-r1.json" rss_after_import_mib)
qmin=$(echo "$qat_rates" | stat_min) qmed=$(echo "$qat_rates" | stat_median)
tmin=$(echo "$torch_rates" | stat_min) tmed=$(echo "$torch_rates" | stat_median)
echo "qat train --qat:   samples/s min $qmin median $qmed over $rounds rounds; peak RSS $qat_rss MiB; OpenBLAS $(jget "$work/qat-r1.json" blas_core)"
echo "torch eager QAT:   samples/s min $tmin median $tmed over $rounds rounds; peak RSS $torch_rss MiB ($torch_base after import torch); OpenBLAS $(jget "$work/torch-r1.json" blas_core)"
echo "speed ratio qat/torch: median $(ratio "$qmed" "$tmed")x, min $(ratio "$qmin" "$tmin")x (bar >= 2x)"

# ---- accuracy: qat's integers against torch's int8 ----------------------------------------
ck=$work/qat-r1.ckpt.h5 qm=$work/kws.qat.h5 cdir=$work/c
rm -rf "$cdir" && mkdir -p "$cdir"  # qat export --c wants the folder to exist
"$bin" export --checkpoint "$ck" --out "$qm" --c "$cdir" --name kws --json 2>"$work/export.log" | tail -1 > "$work/export.json" ||
  { echo "bench_kws: export failed:" >&2; tail -3 "$work/export.log" >&2; exit 1; }
"$bin" eval --model "$qm" --data "$data" --json 2>/dev/null | tail -1 > "$work/eval-int.json"
"$bin" eval --model "$qm" --data "$data" --engine fake --compare int --json 2>/dev/null | tail -1 > "$work/eval-fake.json"
q_int=$(jget "$work/eval-int.json" test_accuracy) q_fake=$(jget "$work/eval-fake.json" test_accuracy)
q_agree=$(jget "$work/eval-fake.json" agreement)
t_int=$(jget "$work/torch-r1.json" test_accuracy_int8) t_fake=$(jget "$work/torch-r1.json" test_accuracy_fake_quant)
same_q=$(for r in $(seq "$rounds"); do jget "$work/qat-r$r.json" test_accuracy; done | sort -u | wc -l)
same_t=$(for r in $(seq "$rounds"); do jget "$work/torch-r$r.json" test_accuracy_int8; done | sort -u | wc -l)
echo "qat accuracy:      int engine $(pct "$q_int") %, fake-quantized $(pct "$q_fake") % (int and fake agree on $(pct "$q_agree") %); $(jget "$work/export.json" bytes) B file"
echo "torch accuracy:    int8 ($engine) $(pct "$t_int") %, fake-quantized $(pct "$t_fake") %"
echo "accuracy bar (qat int >= torch int8): $(awk -v a="$q_int" -v b="$t_int" 'BEGIN { print (a >= b) ? "met" : "NOT met" }'), $(awk -v a="$q_int" -v b="$t_int" 'BEGIN { printf "%+.2f", 100 * (a - b) }') points"
[ "$same_q" = 1 ] && [ "$same_t" = 1 ] || echo "note: the rounds' accuracies differ (qat $same_q values, torch $same_t); the figures above are round 1's"

# ---- the generated C against the integer engine -------------------------------------------
"$bin" eval --model "$qm" --data "$data" --limit-test "$c_samples" --outputs "$work/int-out.npy" --json >/dev/null 2>&1
"$py" -c "import numpy as np, sys; np.load(sys.argv[1])[:int(sys.argv[2])].astype('<f4').tofile(sys.argv[3])" \
  "$data/test_x.npy" "$c_samples" "$work/c-in.f32"
mcu=$root/tests/mcu
cc -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror -DQAT_MODEL=kws -DQAT_MODEL_UP=KWS -DQAT_MODEL_HEADER='"kws.h"' \
  -I"$cdir" -I"$mcu" "$mcu/host_main.c" "$cdir/kws.c" "$cdir/kws_io.c" -o "$work/kws-host"
"$work/kws-host" "$work/c-in.f32" "$c_samples" "$work/c-out.txt"
"$py" - "$work/int-out.npy" "$work/c-out.txt" "$(jget "$work/export.json" const_bytes)" "$(jget "$work/export.json" arena_bytes)" <<'EOF'
import sys, numpy as np
e = np.load(sys.argv[1])
c = np.array([[int(v) for v in l.split(":")[1].split()] for l in open(sys.argv[2])])
same = (e.shape == c.shape) and bool((e == c).all())
rows = int((e == c).all(axis=1).sum()) if e.shape == c.shape else 0
print(f"generated C (host, -O2, raw float input): {rows}/{e.shape[0]} samples' outputs equal the int engine's "
      f"({'all' if same else 'NOT all'} {e.size} integers); {sys.argv[3]} B constants, {sys.argv[4]} B arena")
sys.exit(0 if same else 1)
EOF

# ---- a linear model on the raw values ---------------------------------------------------
printf 'input shape=1,49,10\nflatten flat input\nlinear fc flat out=12\n' > "$work/linear.qnet"
"$bin" train --data "$data" --model "$work/linear.qnet" "${common[@]}" --json 2>/dev/null | tail -1 > "$work/linear.json"
echo "linear model on the raw values (float, the same recipe): $(pct "$(jget "$work/linear.json" test_accuracy)") % (12 classes: chance 8.3 %)"
