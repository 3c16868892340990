# Helpers of bench_kws.sh and bench_data_sets.sh (sourced, not run).

# One line on what the figures were measured on: the date, the CPU (model
# name, family and model, logical CPUs), its widest vector ISA, OpenBLAS's
# kernel family (as qat sees it) and OPENBLAS_CORETYPE, the torch version
# when $1 (a python) has one, and the load average: the figures of a shared
# machine move with it.
bench_header() {
  local py=${1:-} cpu fam mod isa flags torch=""
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)
  mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)
  flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1) "
  case $flags in
    *" avx512_vnni "*) isa="AVX-512 VNNI" ;;
    *" avx512f "*) isa="AVX-512 (no VNNI)" ;;
    *" avx2 "*) isa="AVX2 (no AVX-512)" ;;
    *) isa="no AVX2" ;;
  esac
  if [ -n "$py" ] && [ -x "$py" ]; then
    torch=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
  fi
  echo "machine: $cpu (family $fam model $mod), $(getconf _NPROCESSORS_ONLN) CPUs, $isa; OpenBLAS $("$bin" info 2>/dev/null |
    sed -n 's/^OpenBLAS core: *//p'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}${torch:+; torch $torch}; $(date -u '+%Y-%m-%d %H:%M UTC'); load$(uptime | sed 's/.*load average//')"
}

# jget FILE KEY: a field of a one-line JSON file (the last occurrence when a key repeats)
jget() {
  "${py:-python3}" -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
v = d.get(sys.argv[2])
print("null" if v is None else v)' "$1" "$2"
}

# numbers on stdin, one a line
stat_min() { sort -g | head -1; }
stat_max() { sort -g | tail -1; }
stat_median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pct() { awk -v a="$1" 'BEGIN { printf "%.2f", 100 * a }'; }
# absdiff A B: |A - B| to 4 places, and whether it is within 0.01
absdiff() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f (%s)", d, d <= 0.01 ? "met" : "NOT met" }'; }

# The PyTorch peers on this machine, one python a line: Debian's
# python3-torch (1.13) and the current one from PyPI (.venv-bench/,
# scripts/setup-python.sh bench), each when it imports torch.
# QAT_BENCH_PYTHONS (space-separated pythons) overrides the list.
torch_peers() {
  local root=$1 p
  for p in ${QAT_BENCH_PYTHONS:-/usr/bin/python3 $root/.venv-bench/bin/python}; do
    [ -x "$p" ] && "$p" -c "import torch" 2>/dev/null && echo "$p"
  done
  return 0
}

# min, median and max of space-separated numbers
spaced_min() { tr ' ' '\n' <<< "$1" | grep . | stat_min; }
spaced_median() { tr ' ' '\n' <<< "$1" | grep . | stat_median; }
spaced_max() { tr ' ' '\n' <<< "$1" | grep . | stat_max; }

# peer_lines MODEL: one model's lines from the caller's associative arrays
# rate and rss (space-separated samples/s and peak RSS MiB, keyed qat and
# each peer's index in the array peers): min and median samples/s, peak
# RSS, and qat over each peer (medians).
peer_lines() {
  local q t k v
  q=$(spaced_median "${rate[qat]}")
  echo "$1: qat min $(spaced_min "${rate[qat]}") median $q samples/s, peak RSS $(spaced_max "${rss[qat]}") MiB"
  for k in "${!peers[@]}"; do
    v=$("${peers[$k]}" -c 'import torch; print(torch.__version__)')
    t=$(spaced_median "${rate[$k]}")
    echo "  torch $v: min $(spaced_min "${rate[$k]}") median $t samples/s, peak RSS $(spaced_max "${rss[$k]}") MiB;" \
      "qat/torch $(ratio "$q" "$t")x (medians)"
  done
}
