#!/usr/bin/env bash
# Self-test of fuzz/classify.sh on saved sanitizer logs (fuzz/selftest/),
# so the rule that decides whether CI fails is itself tested:
#   fuzz/classify_selftest.sh        (scripts/fuzz.sh --selftest runs it too)
# The logs are real, from this project's fuzz targets (clang 14, Debian 12's
# libhdf5 1.10.8), with the shadow-byte dumps cut and the source tree's path
# replaced by /src/qat. The qat-* ones come from a scratch copy of the tree
# with a bug planted on purpose (qat's code has none to show):
#   qat-heap-overflow-in-src            idx.c writes one byte past its payload
#   qat-stack-buffer-written-by-libhdf5 the string reader's length check removed:
#                                       H5Aread writes a 200-byte attribute into
#                                       qat__h5r_open's char have[64]
#   qat-arena-block-written-by-libhdf5  the shape check relaxed: H5Dread (pread)
#                                       writes past an arena chunk (qat_ctx_alloc)
#   qat-undefined-behavior              a signed overflow in qat_idx_read
#   qat-timeout                         an endless loop in qat_idx_read (-timeout=3)
# The libhdf5-* ones are reproducers the fuzzer found in libhdf5 1.10.8,
# replayed with fast_unwind_on_malloc=0 (the fork-child one as a fork-mode
# child logs it: fast unwinding, the allocation stack cut inside libhdf5).
# libhdf5-malloc-limit is an out-of-memory stopped at its malloc by
# -malloc_limit_mb (libhdf5 sizing a 16 GiB buffer from a crafted header).
# replay-passed is a replay that does not fail; unsymbolized was run with
# ASAN_OPTIONS=symbolize=0 and must be refused, not guessed at.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/selftest
root=/src/qat   # the path the saved logs use for the source tree

# log | class | kind (prefix) | field~substring that must appear
cases=(
  "qat-heap-overflow-in-src.log|qat|heap-buffer-overflow|qat_frame~read_payload src/data/idx.c:223"
  "libhdf5-heap-overflow-on-libhdf5-block.log|libhdf5|heap-buffer-overflow|frame~H5MM_strdup"
  "libhdf5-leak-h5fl-blk-malloc.log|libhdf5|memory-leak|named~H5FL_blk_malloc"
  "libhdf5-leak-fork-child.log|libhdf5|memory-leak|owner~libhdf5_serial.so"
  "qat-stack-buffer-written-by-libhdf5.log|qat|stack-buffer-overflow|owner~stack of qat__h5r_open src/io/h5util.c"
  "qat-arena-block-written-by-libhdf5.log|qat|heap-buffer-overflow|owner~chunk_new src/autograd/context.c"
  "libhdf5-allocation-size-too-big.log|libhdf5|allocation-size-too-big|frame~H5C_protect"
  "libhdf5-segv-in-libc-memcpy.log|libhdf5|SEGV|top~H5O__msg_iterate_real"
  "qat-undefined-behavior.log|qat|undefined-behavior: signed integer overflow|frame~qat_idx_read src/data/idx.c"
  "qat-timeout.log|qat|timeout|frame~qat_idx_read src/data/idx.c"
  "libhdf5-malloc-limit.log|libhdf5|out-of-memory|frame~H5C_protect"
  "replay-passed.log|none|none|why~no failure"
)

fails=0
for c in "${cases[@]}"; do
  IFS='|' read -r log want_class want_kind check <<< "$c"
  out=$(bash "$here/classify.sh" "$root" "$dir/$log") || { echo "FAIL $log: classify.sh exited $?"; fails=$((fails + 1)); continue; }
  got_class=$(sed -n 's/^class=//p' <<< "$out")
  got_kind=$(sed -n 's/^kind=//p' <<< "$out")
  field=${check%%~*} sub=${check#*~}
  got_field=$(sed -n "s/^$field=//p" <<< "$out")
  if [ "$got_class" = "$want_class" ] && [[ "$got_kind" == "$want_kind"* ]] && [[ "$got_field" == *"$sub"* ]]; then
    echo "ok   $log: $got_class, $got_kind ($field: $got_field)"
  else
    echo "FAIL $log: want $want_class / $want_kind / $field~$sub, got:"
    sed 's/^/       /' <<< "$out"
    fails=$((fails + 1))
  fi
done

# frames without names must stop the classification (exit 3), not pass as "runtime"
rc=0
bash "$here/classify.sh" "$root" "$dir/unsymbolized.log" > /dev/null 2>&1 || rc=$?
if [ "$rc" = 3 ]; then echo "ok   unsymbolized.log: refused (exit 3)"
else echo "FAIL unsymbolized.log: want exit 3, got $rc"; fails=$((fails + 1)); fi

if [ "$fails" -gt 0 ]; then
  echo "classify self-test: $fails case(s) failed" >&2
  exit 1
fi
echo "classify self-test: all $(( ${#cases[@]} + 1 )) cases pass"
