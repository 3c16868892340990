#!/usr/bin/env bash
# Kills qat with SIGKILL at random moments while it saves, and checks
# after every kill that the saved file is whole and that killed saves do
# not pile up temporary files (docs/saving.md).
#
#   tests/kill_saves.sh QAT_BIN MNIST_DIR [N]     (N kills of each kind, default 10)
#
# train: `train --model lenet --qat --limit-train 2048 --epochs 50
#   --save-every 1 --out T` (with --resume T once T exists, so that every
#   run goes on saving) is killed after a random 0.25-1.25 s; a step and a
#   save take a few ms each, so kills land in saves, steps and start-up.
#   After each kill: T, when it exists, loads (`export --checkpoint T` is
#   the loader), and T's directory holds at most one other file (a stale
#   temporary of the killed save).
# export: `export --checkpoint C --out E`, C one of two checkpoints picked
#   at random, is killed after a random 0-50 ms (an export takes ~25 ms).
#   After each kill: `eval --model E` loads and runs E (the old file or a
#   complete new one), and E's directory holds at most one other file.
# export --c: `export --checkpoint C --c D`, C one of the two checkpoints,
#   is killed after a random 0-150 ms (an export with --c takes 30-140 ms,
#   most of it in fsync).
#   After each kill: each of D/model.h, D/model.c and D/model_io.c is byte
#   for byte the file one of the two exports makes whole (else it counts as
#   damaged), and D holds at most one temporary per file. A set whose files
#   come from different exports (a kill between the renames) is counted
#   and reported: each file is whole, the set is not one atomic step.
#
# Prints the figures; exit status 1 if any check failed. QAT_KILL_SEED
# makes the delays repeatable.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 QAT_BIN MNIST_DIR [N]" >&2
  exit 2
fi
bin=$1 data=$2 n=${3:-10}
export OPENBLAS_NUM_THREADS=1
RANDOM=${QAT_KILL_SEED:-$$}
work=$(mktemp -d "${TMPDIR:-/tmp}/qat-kill-XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# A random delay in [lo, hi] seconds, with millisecond resolution.
delay() { awk -v lo="$1" -v hi="$2" -v r="$RANDOM" 'BEGIN { printf "%.3f", lo + (hi - lo) * r / 32767 }'; }

# Files in directory $1 other than $2: temporaries left by killed saves.
others() { find "$1" -mindepth 1 -maxdepth 1 ! -name "$2" | wc -l; }

# Runs "$@" in the background, SIGKILLs it after $delay seconds; sets
# status to its exit status (137 when the kill landed).
run_and_kill() {
  local d=$1
  shift
  "$@" >"$work/out.txt" 2>"$work/err.txt" &
  local pid=$!
  sleep "$d"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  status=$?
}

# ---- train -----------------------------------------------------------------
mkdir "$work/train" "$work/check"
T=$work/train/t.ckpt.h5
kills=0 in_save=0 max_stale=0 bad_loads=0 finished=0
train=(train --data "$data" --model lenet --qat --limit-train 2048 --limit-test 100 --epochs 50
       --save-every 1 --out "$T")
while [ "$kills" -lt "$n" ]; do
  resume=()
  [ -e "$T" ] && resume=(--resume "$T")
  run_and_kill "$(delay 0.25 1.25)" "$bin" "${train[@]}" "${resume[@]}"
  if [ "$status" -ne 137 ]; then
    # not killed: it finished (then start over), or it failed, which is a fault
    if [ "$status" -eq 0 ] || grep -q "nothing left to train" "$work/err.txt"; then
      finished=$((finished + 1))
      rm -f "$T"
      continue
    fi
    fail "train exited with status $status: $(tail -1 "$work/err.txt")"
    bad_loads=$((bad_loads + 1))
    rm -f "$T"
    continue
  fi
  kills=$((kills + 1))
  stale=$(others "$work/train" t.ckpt.h5)
  [ "$stale" -gt 0 ] && in_save=$((in_save + 1))
  [ "$stale" -gt "$max_stale" ] && max_stale=$stale
  [ "$stale" -le 1 ] || fail "train kill $kills: $stale temporary files: $(ls -A "$work/train" | tr '\n' ' ')"
  if [ -e "$T" ] && ! "$bin" export --checkpoint "$T" --out "$work/check/e.qat.h5" >/dev/null 2>"$work/check/err.txt"; then
    bad_loads=$((bad_loads + 1))
    fail "train kill $kills: $T does not load: $(tail -1 "$work/check/err.txt")"
  fi
done
echo "train: $kills kills ($in_save left a temporary file, i.e. landed in a save's write), runs that finished: $finished," \
  "max stale temporaries: $max_stale, checkpoints that failed to load: $bad_loads"

# ---- export ----------------------------------------------------------------
mkdir "$work/export"
E=$work/export/e.qat.h5
for k in 1 2; do  # two checkpoints: two different exports
  "$bin" train --data "$data" --model lenet --qat --limit-train 256 --limit-test 10 --epochs 1 --seed "$k" \
    --out "$work/c$k.ckpt.h5" >/dev/null 2>&1 || fail "cannot make checkpoint $k"
done
"$bin" export --checkpoint "$work/c1.ckpt.h5" --out "$E" >/dev/null 2>&1 || fail "cannot export"
ekills=0 ein_save=0 emax_stale=0 ebad=0 changed=0 prev=$(stat -c %i "$E")
while [ "$ekills" -lt "$n" ]; do
  k=$((RANDOM % 2 + 1))
  run_and_kill "$(delay 0 0.05)" "$bin" export --checkpoint "$work/c$k.ckpt.h5" --out "$E"
  [ "$status" -eq 137 ] || continue  # it finished first: try again
  ekills=$((ekills + 1))
  stale=$(others "$work/export" e.qat.h5)
  [ "$stale" -gt 0 ] && ein_save=$((ein_save + 1))
  [ "$stale" -gt "$emax_stale" ] && emax_stale=$stale
  [ "$stale" -le 1 ] || fail "export kill $ekills: $stale temporary files: $(ls -A "$work/export" | tr '\n' ' ')"
  if ! "$bin" eval --data "$data" --model "$E" --limit-test 10 >/dev/null 2>"$work/check/err.txt"; then
    ebad=$((ebad + 1))
    fail "export kill $ekills: $E does not load: $(tail -1 "$work/check/err.txt")"
  fi
  now=$(stat -c %i "$E")  # every completed save puts a new file (inode) there
  [ "$now" != "$prev" ] && changed=$((changed + 1))
  prev=$now
done
echo "export: $ekills kills ($ein_save left a temporary file), a new file had replaced the old one after $changed of them," \
  "max stale temporaries: $emax_stale, models that failed to load: $ebad"

# a save that completes removes the stale temporary the last kill left
"$bin" export --checkpoint "$work/c1.ckpt.h5" --out "$E" >/dev/null 2>&1 || fail "the last export failed"
[ "$(others "$work/export" e.qat.h5)" -eq 0 ] || fail "a stale temporary file survived a completed save"

# ---- export --c ------------------------------------------------------------
D=$work/c
mkdir "$D" "$work/ref1" "$work/ref2"
for k in 1 2; do
  "$bin" export --checkpoint "$work/c$k.ckpt.h5" --c "$work/ref$k" >/dev/null 2>&1 || fail "cannot export C from checkpoint $k"
done
cmp -s "$work/ref1/model.c" "$work/ref2/model.c" && fail "the two checkpoints give the same model.c: the test could not tell them apart"
"$bin" export --checkpoint "$work/c1.ckpt.h5" --c "$D" >/dev/null 2>&1 || fail "cannot export C"
ckills=0 cin_save=0 cmax_stale=0 damaged=0 mixed=0 cchanged=0 prev=$(stat -c %i "$D/model.c")
while [ "$ckills" -lt "$n" ]; do
  k=$((RANDOM % 2 + 1))
  run_and_kill "$(delay 0 0.15)" "$bin" export --checkpoint "$work/c$k.ckpt.h5" --c "$D"
  [ "$status" -eq 137 ] || continue
  ckills=$((ckills + 1))
  stale=$(find "$D" -mindepth 1 -maxdepth 1 -name '.*qat-tmp*' | wc -l)
  [ "$stale" -gt 0 ] && cin_save=$((cin_save + 1))
  [ "$stale" -gt "$cmax_stale" ] && cmax_stale=$stale
  [ "$stale" -le 3 ] || fail "export --c kill $ckills: $stale temporary files: $(ls -A "$D" | tr '\n' ' ')"
  all1=1 all2=1
  for f in model.h model.c model_io.c; do
    cmp -s "$D/$f" "$work/ref1/$f" && is1=1 || { is1=0; all1=0; }
    cmp -s "$D/$f" "$work/ref2/$f" && is2=1 || { is2=0; all2=0; }
    if [ "$is1" = 0 ] && [ "$is2" = 0 ]; then
      damaged=$((damaged + 1))
      fail "export --c kill $ckills: $D/$f is damaged (neither export's file)"
    fi
  done
  [ "$all1" = 1 ] || [ "$all2" = 1 ] || mixed=$((mixed + 1))  # whole files of two exports
  now=$(stat -c %i "$D/model.c")
  [ "$now" != "$prev" ] && cchanged=$((cchanged + 1))
  prev=$now
done
echo "export --c: $ckills kills ($cin_save left temporary files), new files had replaced the old ones after $cchanged of them," \
  "max stale temporaries: $cmax_stale (3 files), damaged files: $damaged, sets mixing two exports: $mixed"
"$bin" export --checkpoint "$work/c1.ckpt.h5" --c "$D" >/dev/null 2>&1 || fail "the last export --c failed"
[ "$(find "$D" -mindepth 1 -maxdepth 1 -name '.*qat-tmp*' | wc -l)" -eq 0 ] || fail "stale temporaries survived a completed export --c"

[ "$failures" -eq 0 ] && echo "kill_saves: passed" || echo "kill_saves: $failures failure(s)"
[ "$failures" -eq 0 ]
