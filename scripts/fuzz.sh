#!/usr/bin/env bash
# Fuzzes qat's file readers with libFuzzer: fuzz_idx (qat_idx_read),
# fuzz_checkpoint (the training checkpoint readers), fuzz_qmodel
# (qat_qmodel_load, then the integer engine on what it accepts).
#   scripts/fuzz.sh [SECONDS]    each target for SECONDS (default 30)
# Installs clang and its sanitizer runtimes when missing, builds the
# targets in build-fuzz/ (clang, QAT_FUZZ=ON: the whole tree instrumented),
# and runs each one on a copy of its seeds (fuzz/seeds/<target>/, plus the
# checkpoints fuzz/make_seeds.sh --all makes when qat-mnist and MNIST are
# there, as after scripts/test.sh). Exits non-zero if any target crashed,
# leaked, timed out or ran out of memory, after printing each reproducer
# and where it failed: the failing frame, the first one in qat's own code
# and whose memory it was. A failure in libhdf5's code on libhdf5's memory
# is a bug of libhdf5 1.10.8 reached through qat; it is reported all the
# same (there is no switch to ignore it).
# Replay one: build-fuzz/fuzz/fuzz_<target> <reproducer>
set -euo pipefail
secs=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# ---- clang and libFuzzer (as scripts/setup-deps.sh: apt-get as root, sudo otherwise)
bash scripts/setup-deps.sh
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "fuzz: missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- build: tests, examples and benchmarks are not needed here
CC=clang cmake -S . -B build-fuzz -DQAT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQAT_BUILD_TESTS=OFF -DQAT_BUILD_EXAMPLES=OFF -DQAT_BUILD_BENCH=OFF >/dev/null
# clang warns where gcc does not (the -Werror gate is scripts/test.sh's gcc build): keep it in a log
cmake --build build-fuzz -j"$(nproc)" > build-fuzz/build.log 2>&1 || { tail -40 build-fuzz/build.log; exit 1; }

# ---- seeds: the committed ones, and the checkpoints too big to commit
extra=build-fuzz/seeds-extra
if [ -x build/examples/mnist/qat-mnist ] && [ -d "${QAT_MNIST_DIR:-data/mnist}" ]; then
  rm -rf "$extra"
  bash fuzz/make_seeds.sh --all "$extra" 2>/dev/null
else
  echo "fuzz: no build/examples/mnist/qat-mnist or MNIST: committed seeds only (no training checkpoint)" >&2
fi

# frames FILE: stack frame lines, without the sanitizers' and libFuzzer's own
frames() {
  grep -E "^ +#[0-9]+ 0x" "$1" | sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ //; s/ \(BuildId: [0-9a-f]+\)//' \
    | grep -vE "^in (__interceptor_[a-z_]+|__asan_[a-z_]+|malloc|calloc|realloc|free|strdup) " \
    | grep -vE "fuzzer::|LLVMFuzzer|libc_start|^in _start|^in main " || true
}
# where LOG: the sanitizer's verdict, the failing frame, the first frame in
# qat's code, and whose memory it was (a libhdf5 frame that overflows a
# buffer qat passed it is qat's bug, not libhdf5's)
where() {
  grep -m1 -E "^SUMMARY: |ERROR: libFuzzer|ERROR: [A-Za-z]+Sanitizer" "$1" || true
  local first qat owner
  first=$(frames "$1" | head -1)
  qat=$(frames "$1" | grep -m1 -F "$root/src/" || true)
  # the frame that owns the memory: a stack frame, or where the block was allocated
  owner=$(sed -n -E '/is located in stack of thread|allocated by thread/,$p' "$1" | frames /dev/stdin | head -1)
  echo "  failing frame: ${first:-?}"
  echo "  first frame in qat: ${qat:-none}"
  [ -n "$owner" ] && echo "  the memory belongs to: $owner"
  case "$first" in *libhdf5*)
    case "$owner" in *"$root/src/"*) echo "  (libhdf5 code on memory qat handed it: look at the size qat passed)" ;;
                     *) echo "  (the failing code is libhdf5's, reached through the frame above)" ;; esac ;;
  esac
}

failed=0
for t in idx checkpoint qmodel; do
  run=build-fuzz/run/$t
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  # libFuzzer adds to the corpus directory it is given: fuzz a copy
  for dir in "fuzz/seeds/$t" "$extra/$t"; do
    for f in "$dir"/*; do [ -f "$f" ] && cp "$f" "$run/corpus/$(basename "$dir")-$(basename "$f")"; done
  done
  # the checkpoint readers also start from the quantized models: valid
  # HDF5 files of the other kind
  if [ "$t" = checkpoint ]; then
    for f in fuzz/seeds/qmodel/*; do [ -f "$f" ] && cp "$f" "$run/corpus/qmodel-$(basename "$f")"; done
  fi
  rc=0
  "build-fuzz/fuzz/fuzz_$t" "$run/corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$run/artifacts/" -print_final_stats=1 > "$run/log" 2>&1 || rc=$?
  execs=$(sed -nE 's/^stat::number_of_executed_units: *//p' "$run/log")
  cov=$(grep -E "^#[0-9]+.*cov: " "$run/log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/')
  if [ "$rc" = 0 ]; then
    echo "fuzz_$t: ok, ${execs:-?} runs in $secs s, cov ${cov:-?} (log: $run/log)"
  else
    failed=1
    echo "fuzz_$t: FAILED (exit $rc) after ${execs:-?} runs, cov ${cov:-?} (log: $run/log)"
    log=$run/log
    for a in "$run"/artifacts/*; do
      [ -f "$a" ] || continue
      echo "  reproducer: $a"
      # again with whole allocation stacks: libhdf5 has no frame pointers,
      # so the fast unwinder stops inside it, before any caller of qat's
      ASAN_OPTIONS=fast_unwind_on_malloc=0 "build-fuzz/fuzz/fuzz_$t" "$a" > "$run/replay.log" 2>&1 || true
      grep -qE "^ +#[0-9]+ 0x" "$run/replay.log" && log=$run/replay.log
    done
    where "$log"
  fi
done
# a crashed target skips its atexit: remove the input files of processes that are gone
for f in /dev/shm/qat-fuzz-* "${TMPDIR:-/tmp}"/qat-fuzz-*; do
  [ -f "$f" ] && [ ! -d "/proc/${f##*-}" ] && rm -f "$f"
done
exit $failed
