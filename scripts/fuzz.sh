#!/usr/bin/env bash
# Fuzzes qat's file readers with libFuzzer: fuzz_idx (qat_idx_read),
# fuzz_checkpoint (the training checkpoint readers), fuzz_qmodel
# (qat_qmodel_load, then the integer engine on what it accepts), fuzz_npy
# (the .npy reader inside a data-set directory), fuzz_h5data (HDF5 data
# sets, in memory and streamed; the data-set targets read what opened) and
# fuzz_qnet (model files: qat_model_from_file under small limits, then
# build, forward, QAT prepare, lowering and the integer engine on what it
# accepts) and fuzz_log (qat plot's reader of training logs).
#   scripts/fuzz.sh [SECONDS]    each target for SECONDS (default 30)
#   scripts/fuzz.sh --selftest   only the classifier's self-test
#   QAT_FUZZ_TARGETS="npy h5data" scripts/fuzz.sh 120   only those targets
# Installs clang, its sanitizer runtimes and llvm-symbolizer when missing,
# builds the targets in build-fuzz/ (clang, QAT_FUZZ=ON: the whole tree
# instrumented), and fuzzes each one on a copy of its seeds
# (fuzz/seeds/<target>/, plus the checkpoints fuzz/make_seeds.sh --all makes
# when qat and MNIST are there, as after scripts/test.sh).
#
# The HDF5 targets reach bugs inside libhdf5 1.10.8 within seconds, so each
# target runs in libFuzzer's fork mode, which keeps fuzzing past crashes,
# leaks, timeouts and out-of-memory. Then every reproducer is replayed alone
# and classified by fuzz/classify.sh (the rule is in docs/trust-model.md):
#   qat              the failing frame is qat's, or the memory is (a qat stack
#                    variable, a block qat's code allocated), or a leaked block
#                    was allocated by qat's code; anything not shown to be
#                    libhdf5's counts here too
#   libhdf5          libhdf5's code on libhdf5's memory, a leak or an absurd
#                    allocation made by libhdf5, a timeout spent in libhdf5
#   not reproducible the replay alone passes: qat keeps no global state, so
#                    the crash needed libhdf5's state from earlier inputs
# Exit status: 1 if any finding is qat's, 2 if the build, the classifier's
# self-test, the symbolizer or a target fails to run, else 0. libhdf5 and
# not-reproducible findings are reported, and do not fail.
# Everything stays in build-fuzz/run/<target>/: log (libFuzzer's), corpus/,
# artifacts/ (the reproducers), children/ (each fork child's sanitizer
# report), replay/<artifact>.log, findings.tsv.
# Replay one: build-fuzz/fuzz/fuzz_<target> <reproducer>
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

case "${1:-}" in
  --selftest) exec bash fuzz/classify_selftest.sh ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
secs=${1:-30}
case "$secs" in ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] | --selftest" >&2; exit 2 ;; esac

# ---- clang, libFuzzer and llvm-symbolizer (as scripts/setup-deps.sh: apt-get as root, sudo otherwise).
# llvm-symbolizer is llvm-14's, which clang only recommends: without it the
# sanitizers print bare addresses, and nothing can be classified
bash scripts/setup-deps.sh
missing=()
for p in clang libclang-rt-14-dev llvm-14; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "fuzz: missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- the symbolizer, named explicitly rather than left to the runtime's search
sym=${ASAN_SYMBOLIZER_PATH:-}
[ -n "$sym" ] || sym=$(command -v llvm-symbolizer || true)
if [ -z "$sym" ]; then
  for s in /usr/lib/llvm-14/bin/llvm-symbolizer /usr/lib/llvm-*/bin/llvm-symbolizer; do
    [ -x "$s" ] && { sym=$s; break; }
  done
fi
if [ -z "$sym" ] || [ ! -x "$sym" ]; then
  echo "fuzz: no llvm-symbolizer (Debian package llvm-14; or set ASAN_SYMBOLIZER_PATH): stack frames would have no names" >&2
  exit 2
fi
export ASAN_SYMBOLIZER_PATH=$sym UBSAN_SYMBOLIZER_PATH=$sym LSAN_SYMBOLIZER_PATH=$sym

# ---- build: tests, examples and benchmarks are not needed here
mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DQAT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQAT_BUILD_TESTS=OFF -DQAT_BUILD_EXAMPLES=OFF -DQAT_BUILD_BENCH=OFF -DQAT_WERROR=ON >/dev/null
# -Werror under clang too (it warns where gcc does not); the log keeps the build's output
cmake --build build-fuzz -j"$(nproc)" > build-fuzz/build.log 2>&1 || {
  tail -40 build-fuzz/build.log
  echo "fuzz: the build failed (build-fuzz/build.log)" >&2
  exit 2
}

# ---- the classifier decides whether this script fails: test it first
bash fuzz/classify_selftest.sh > build-fuzz/classify-selftest.log 2>&1 || {
  cat build-fuzz/classify-selftest.log
  echo "fuzz: the classifier's self-test failed" >&2
  exit 2
}

# ---- seeds: the committed ones, and the checkpoints too big to commit
extra=build-fuzz/seeds-extra
if [ -x build/tools/qat/qat ] && [ -d "${QAT_MNIST_DIR:-data/mnist}" ]; then
  rm -rf "$extra"
  bash fuzz/make_seeds.sh --all "$extra" 2>/dev/null
else
  echo "fuzz: no build/tools/qat/qat or MNIST: committed seeds only (no training checkpoint)" >&2
fi

# replay options: whole allocation stacks (libhdf5 has no frame pointers, so
# the fast unwinder stops inside it, before any caller of qat's), deep enough
# to reach the fuzz target; UBSan prints a stack too
replay_asan="fast_unwind_on_malloc=0:malloc_context_size=100:symbolize=1"
replay_ubsan="print_stacktrace=1:symbolize=1"

# child_log RUN ARTIFACT: the fork child's sanitizer report that goes with a
# reproducer. -fork=1 runs one child at a time, and a child writes its report
# and then its reproducer before it exits: the report is the newest one not
# newer than the reproducer.
child_log() {
  local t
  t=$(find "$2" -maxdepth 0 -printf '%T@')
  find "$1/children" -maxdepth 1 -type f -name 'san.*' -printf '%T@ %p\n' 2>/dev/null |
    awk -v t="$t" '$1 <= t && $1 >= best { best = $1; path = $2 } END { if (path != "") print path }'
}

# get KEY: a field of the classifier's output in $out
get() { sed -n "s/^$1=//p" <<< "$out"; }

qat_total=0 hdf5_total=0 nrep_total=0 broken=0
targets=${QAT_FUZZ_TARGETS:-idx checkpoint qmodel npy h5data qnet log}
for t in $targets; do
  case "$t" in idx|checkpoint|qmodel|npy|h5data|qnet|log) ;; *) echo "fuzz: unknown target $t in QAT_FUZZ_TARGETS" >&2; exit 2 ;; esac
done
for t in $targets; do
  bin=build-fuzz/fuzz/fuzz_$t
  run=build-fuzz/run/$t
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts" "$run/children" "$run/replay" "$run/empty"
  # libFuzzer adds to the corpus directory it is given: fuzz a copy
  for dir in "fuzz/seeds/$t" "$extra/$t"; do
    for f in "$dir"/*; do [ -f "$f" ] && cp "$f" "$run/corpus/$(basename "$dir")-$(basename "$f")"; done
  done
  # the checkpoint and data-set readers also start from the quantized
  # models: valid HDF5 files of another kind
  if [ "$t" = checkpoint ] || [ "$t" = h5data ]; then
    for f in fuzz/seeds/qmodel/*; do [ -f "$f" ] && cp "$f" "$run/corpus/qmodel-$(basename "$f")"; done
  fi

  # the symbolizer, end to end: libFuzzer names the target's entry point
  # through the sanitizer runtime's symbolizer, with its source file
  "$bin" -runs=0 -print_coverage=1 "$run/empty" > "$run/symbolizer-check.log" 2>&1 || true
  if ! grep -qF "LLVMFuzzerTestOneInput $root/fuzz/fuzz_$t.c:" "$run/symbolizer-check.log"; then
    echo "fuzz_$t: frames are not symbolized (no 'LLVMFuzzerTestOneInput $root/fuzz/fuzz_$t.c' in $run/symbolizer-check.log; symbolizer: $sym)" >&2
    broken=1
    continue
  fi

  # -malloc_limit_mb as well as -rss_limit_mb: one oversized allocation
  # (libhdf5 sizing a buffer from a crafted header) is then stopped at its
  # malloc, with the stack that made it, instead of surfacing later as a
  # process over its RSS limit whose report shows no culprit (which the
  # classifier must count as qat's: unproven).
  # fork mode: a crash, leak, timeout or OOM ends that child only. Each
  # child's sanitizer report goes to its own file (children/san.<pid>), since
  # libFuzzer keeps only the ERROR line of an ignored crash.
  rc=0
  ASAN_OPTIONS="log_path=$root/$run/children/san" \
  UBSAN_OPTIONS="print_stacktrace=1:log_path=$root/$run/children/san" \
    "$bin" "$run/corpus" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix="$run/artifacts/" \
      > "$run/log" 2>&1 &
  parent=$!
  wait "$parent" || rc=$?
  # the parent exits non-zero whenever a child crashed: whether it ran is in its log
  stats=$(grep -E '^#[0-9]+: cov: ' "$run/log" | tail -1 || true)
  if [ -z "$stats" ] || ! grep -q '^INFO: exiting: ' "$run/log"; then
    tail -20 "$run/log"
    echo "fuzz_$t: did not run (exit $rc; log: $run/log)" >&2
    broken=1
    continue
  fi
  rm -f "$run/children/san.$parent"   # the parent's own report, if any, is no finding
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<< "$stats")
  cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<< "$stats")

  # ---- replay and classify every reproducer
  printf 'class\tkind\treproducer\tfailing frame\ttop qat frame\tmemory owner\twhy\tlog\n' > "$run/findings.tsv"
  nq=0 nh=0 nn=0 qat_lines="" nrep_lines="" groups=""
  for a in "$run"/artifacts/*; do
    [ -f "$a" ] || continue
    name=$(basename "$a")
    case "$name" in slow-unit-*) continue ;; esac   # slow, not failing
    rlog=$run/replay/$name.log
    # timeouts replay without slow unwinding: it slows every malloc, and the
    # timeout's own stack is unwound fully anyway
    opts=$replay_asan
    case "$name" in timeout-*) opts="symbolize=1" ;; esac
    ASAN_OPTIONS=$opts UBSAN_OPTIONS=$replay_ubsan \
      timeout -k 5 120 "$bin" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 "$a" > "$rlog" 2>&1 || true
    crc=0
    out=$(bash fuzz/classify.sh "$root" "$rlog") || crc=$?
    # a crash that became a timeout under the slow unwinder: replay it as it ran
    if [ "$crc" = 0 ] && grep -q '^kind=timeout$' <<< "$out" && [ "$opts" != "symbolize=1" ]; then
      ASAN_OPTIONS="symbolize=1" UBSAN_OPTIONS=$replay_ubsan \
        timeout -k 5 120 "$bin" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 "$a" > "$rlog" 2>&1 || true
      out=$(bash fuzz/classify.sh "$root" "$rlog") || crc=$?
    fi
    if [ "$crc" != 0 ]; then
      echo "fuzz_$t: cannot classify $a (classify.sh exit $crc; replay log: $rlog)" >&2
      broken=1
      continue
    fi
    class=$(get class) kind=$(get kind) frame=$(get frame) qf=$(get qat_frame) owner=$(get owner) why=$(get why)
    named=$(get named) evidence=$rlog
    if [ "$class" = none ]; then
      # not reproducible alone: the evidence is the fork child's own report
      class="not reproducible" kind=${name%%-*}
      clog=$(child_log "$run" "$a")
      if [ -n "$clog" ] && cout=$(bash fuzz/classify.sh "$root" "$clog" 2>/dev/null); then
        k=$(sed -n 's/^kind=//p' <<< "$cout")
        [ "$k" != none ] && [ "$k" != unknown ] && kind=$k
        frame=$(sed -n 's/^top=//p' <<< "$cout")
        named=$(sed -n 's/^named=//p' <<< "$cout")
        qf=$(sed -n 's/^qat_frame=//p' <<< "$cout")
        why="passes when replayed alone; the fork child's report: $clog"
        # not a failure (qat keeps no state across inputs), but worth a look
        if grep -q '^class=qat$' <<< "$cout"; then
          why+=" (that report points at qat's code)"
          nrep_lines+="  note: $a does not reproduce alone, but its fork child's report points at qat's code: $clog"$'\n'
        fi
        evidence=$clog
      else
        frame="?" named="?" qf="?" why="passes when replayed alone (no child report kept)"
      fi
      owner="-"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$class" "$kind" "$a" "$frame" "$qf" "$owner" "$why" "$evidence" >> "$run/findings.tsv"
    case "$class" in
      qat) nq=$((nq + 1))
           [ "$qf" = none ] && qf=$frame
           qat_lines+="$kind"$'\t'"$qf"$'\t'"$frame; $why"$'\t'"$a"$'\n' ;;
      libhdf5) nh=$((nh + 1)); groups+="libhdf5: $kind in $named"$'\n' ;;
      *) nn=$((nn + 1)); groups+="not reproducible: $kind in $named"$'\n' ;;
    esac
  done
  echo "fuzz_$t: $execs runs in $secs s, cov $cov; findings: $nq qat, $nh libhdf5, $nn not reproducible (table: $run/findings.tsv)"
  # qat's findings, one group per kind and top qat frame, each reproducer
  # listed (the first 5 of a group here, all of them in findings.tsv)
  if [ -n "$qat_lines" ]; then
    sort -t $'\t' -k1,2 <<< "${qat_lines%$'\n'}" | awk -F '\t' -v tsv="$run/findings.tsv" '
      $1 "\t" $2 != g { if (more) print "      ... and " more " more (" tsv ")"
                        g = $1 "\t" $2; n = 0; more = 0
                        print "  QAT " $1 " at " $2 " (failing frame: " $3 "):" }
      { if (++n <= 5) print "      " $4; else more++ }
      END { if (more) print "      ... and " more " more (" tsv ")" }'
  fi
  printf '%s' "$nrep_lines"
  # what libhdf5 hit, grouped, so a new kind of libhdf5 failure is visible too
  if [ -n "$groups" ]; then sort <<< "${groups%$'\n'}" | uniq -c | sed -E 's/^ *([0-9]+) /    \1 x /'; fi
  qat_total=$((qat_total + nq)) hdf5_total=$((hdf5_total + nh)) nrep_total=$((nrep_total + nn))
done

# a crashed target skips its atexit: remove the input files of processes that are gone
for f in /dev/shm/qat-fuzz-* "${TMPDIR:-/tmp}"/qat-fuzz-*; do
  [ -f "$f" ] && [ ! -d "/proc/${f##*-}" ] && rm -f "$f"
done

if [ "$broken" != 0 ]; then
  echo "fuzz: FAILED: a target did not run or could not be classified (messages above)" >&2
  exit 2
fi
if [ "$qat_total" -gt 0 ]; then
  echo "fuzz: FAILED: $qat_total finding(s) in qat's code (QAT lines above; replay one with build-fuzz/fuzz/fuzz_<target> <reproducer>)" >&2
  exit 1
fi
echo "fuzz: no finding in qat's code ($hdf5_total in libhdf5 1.10.8, $nrep_total not reproducible alone: a documented limitation, docs/trust-model.md)"
