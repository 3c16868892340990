#!/usr/bin/env bash
# Data-parallel training on 2 MPI ranks (CTest mpi_train):
#   1. the ranks end with identical parameters, observers and BatchNorm
#      buffers (LeNet-BN W8A8 QAT with LSQ: BatchNorm synchronized, folded);
#   2. a rerun (with 2 threads per rank) gives the same bits;
#   3. stopped and resumed on 2 ranks, the run ends bit-identical;
#   4. the comparison is not vacuous: one process differs from two;
#   5. a rank killed mid-run ends the job with an error that names the
#      last complete checkpoint, and that checkpoint is whole and resumes;
#   6. the ranks stay identical through what touches state on the side:
#      the metrics log's evaluations (--log, fake quantization switched on
#      during --qat-warmup) and dropout with uneven shares (batch 63);
#   7. a rank stopped with SIGSTOP (a hung node) does not hang the job:
#      with --mpi-timeout 3 the job ends within seconds, with a message that
#      names the silent rank and the last complete checkpoint, the stopped
#      process is gone, and the checkpoint resumes; rank 1 stopped (rank 0
#      reports), then rank 0 stopped (rank 1 reports);
#   8. a refusal before training, met by every rank (an unknown option, a
#      missing data set) or by rank 0 alone (a resume onto another run's
#      --log), is said once, by the rank that refused, with its status and
#      without MPI_Abort;
#   9. SIGUSR1 to mpirun (which forwards it to every rank) stops the job
#      after a step with the checkpoint written and status 130, and the
#      run resumes from it.
#  10. the other commands refuse to run as a job (export: exit 2, nothing
#      written).
# Skipped (77) without mpirun or a qat built with MPI.
#   tests/mpi_train.sh QAT_MNIST CKPT_CMP DATA_DIR
set -uo pipefail
bin=$1 cmp=$2 data=$3
command -v mpirun >/dev/null || { echo "SKIPPED: mpi_train: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# containers often forbid the cross-memory attach that the shared-memory
# transport tries first: plain copies instead
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# one machine: mpirun starts the ranks itself, no ssh/rsh agent needed
export OMPI_MCA_plm=isolated
# Under ASan (QAT_SANITIZE=1): OpenMPI leaves what MPI_Init allocated to
# the process's exit. tests/mpi.lsan.supp suppresses leaks whose stack
# holds an OpenMPI library frame, which needs whole stacks (the fast
# unwinder stops in libraries built without frame pointers) and the MCA
# components kept loaded so that their frames have names. Ignored by
# a build without ASan.
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/mpi.lsan.supp" ASAN_OPTIONS=fast_unwind_on_malloc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAILED: $*"; fails=$((fails + 1)); }
mpi() { mpirun -np 2 --oversubscribe -x LSAN_OPTIONS -x ASAN_OPTIONS "$bin" train "$@"; }
common=(--model lenet-bn --qat --lsq --limit-train 1280 --limit-test 200 --epochs 2 --seed 5 --data "$data")

out=$(mpi "${common[@]}" --out "$tmp/a.h5" --rank-checkpoints --json 2> "$tmp/a.err"); arc=$?
if grep -q "built without MPI" "$tmp/a.err"; then
  echo "SKIPPED: mpi_train: qat was built without MPI"; exit 77
fi
[ -f "$tmp/a.h5" ] && [ $arc = 0 ] || { tail -30 "$tmp/a.err"; echo "FAILED: the 2-rank run failed (exit $arc)"; exit 1; }
echo "$out" | tail -1 | grep -q '"ranks": 2, "ranks_identical": true' || fail "1: JSON does not report 2 identical ranks"
"$cmp" "$tmp/a.h5" "$tmp/a.h5.rank1" || fail "1: rank 0 and rank 1 ended with different states"
[ "$(grep -c "test accuracy" "$tmp/a.err")" -ge 1 ] && [ "$(grep -c "^epoch 1:" "$tmp/a.err")" = 1 ] \
  || fail "1: rank 0 alone should print (one line per epoch)"

mpi "${common[@]}" --threads 2 --out "$tmp/b.h5" 2> "$tmp/b.err" >/dev/null || { tail "$tmp/b.err"; fail "2: rerun failed"; }
"$cmp" "$tmp/a.h5" "$tmp/b.h5" || fail "2: a rerun with the same 2 ranks (2 threads each) is not bit-identical"

mpi "${common[@]}" --stop-after 27 --out "$tmp/c.h5" 2> "$tmp/c.err" >/dev/null || fail "3: stopped run failed"
mpi "${common[@]}" --resume "$tmp/c.h5" --out "$tmp/c.h5" 2> "$tmp/c2.err" >/dev/null || fail "3: resume failed"
grep -q "resumed from" "$tmp/c2.err" || fail "3: no resume message"
"$cmp" "$tmp/a.h5" "$tmp/c.h5" || fail "3: stop + resume on 2 ranks is not bit-identical to the straight run"

"$bin" train "${common[@]}" --out "$tmp/one.h5" 2>/dev/null >/dev/null || fail "4: one-process run failed"
"$cmp" "$tmp/a.h5" "$tmp/one.h5" >/dev/null
[ $? = 1 ] || fail "4: ckpt_cmp found one process and two ranks identical (or could not compare)"

# 5: kill rank 1 once a checkpoint exists
mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --out "$tmp/d.h5" \
  --save-every 5 2> "$tmp/d.err" > /dev/null &
job=$!
for _ in $(seq 300); do [ -f "$tmp/d.h5" ] && break; sleep 0.1; done
sleep 0.5
victim=""
for p in $(pgrep -P "$job") $(for c in $(pgrep -P "$job"); do pgrep -P "$c"; done); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
done
if [ -z "$victim" ]; then
  fail "5: rank 1 not found"; kill "$job" 2>/dev/null
else
  kill -9 "$victim"
fi
wait "$job"; rc=$?
[ "$rc" != 0 ] || fail "5: the job survived the death of a rank (exit 0)"
grep -q "the last complete checkpoint is $tmp/d.h5" "$tmp/d.err" || { tail -5 "$tmp/d.err"; fail "5: no message naming the checkpoint"; }
"$cmp" "$tmp/d.h5" "$tmp/d.h5" >/dev/null || fail "5: the last checkpoint does not load"
mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --resume "$tmp/d.h5" \
  --stop-after 400 2> "$tmp/d2.err" > /dev/null
grep -q "resumed from" "$tmp/d2.err" || fail "5: the last checkpoint does not resume"

# 6: identical ranks (the run compares them, and fails if they differ)
mpi --model mlp --qat --qat-warmup 1000 --limit-train 512 --limit-test 200 --epochs 1 --data "$data" \
  --log "$tmp/e.csv" 2> "$tmp/e.err" > /dev/null || { tail -3 "$tmp/e.err"; fail "6: --log with --qat-warmup on 2 ranks"; }
[ "$(grep -c '^epoch,' "$tmp/e.csv" 2>/dev/null)" = 1 ] || fail "6: the log should have one epoch row, from rank 0"
printf 'input shape=784\nlinear fc1 input out=64\nrelu r1 fc1\ndropout d1 r1 p=0.5\nlinear fc2 d1 out=10\n' > "$tmp/drop.qnet"
mpi --model-file "$tmp/drop.qnet" --batch 63 --limit-train 630 --limit-test 200 --epochs 1 --data "$data" \
  2> "$tmp/f.err" > /dev/null || { tail -3 "$tmp/f.err"; fail "6: dropout with uneven shares on 2 ranks"; }

# 7: stop a rank (SIGSTOP: alive, silent) once a checkpoint exists
rank_pid() {  # the pid of rank $2 among job $1's processes (mpirun's children or grandchildren)
  local p
  for p in $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}
for stopped in 1 0; do
  rm -f "$tmp/g.h5"
  mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --out "$tmp/g.h5" \
    --save-every 5 --mpi-timeout 3 2> "$tmp/g.err" > /dev/null &
  job=$!
  for _ in $(seq 300); do [ -f "$tmp/g.h5" ] && break; sleep 0.1; done
  sleep 0.5
  victim=$(rank_pid "$job" "$stopped")
  if [ -z "$victim" ]; then fail "7: rank $stopped not found"; kill "$job" 2>/dev/null; wait "$job"; continue; fi
  kill -STOP "$victim"
  t0=$(date +%s)
  # the watchdog must end the job: 3 s of timeout, 1 s of questions, the abort; 60 s is a hang
  for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    fail "7: rank $stopped stopped: the job still runs after 60 s"
    kill -CONT "$victim"; kill "$job"; wait "$job"; continue
  fi
  wait "$job"; rc=$?
  waited=$(( $(date +%s) - t0 ))
  [ "$rc" != 0 ] || fail "7: rank $stopped stopped: the job ended with status 0"
  other=$((1 - stopped))
  grep -q "qat: rank $other: rank $stopped silent: waited [0-9.]* s for " "$tmp/g.err" ||
    { tail -5 "$tmp/g.err"; fail "7: rank $stopped stopped: no message naming it"; }
  if [ "$stopped" = 1 ]; then
    grep -q "ending the job; the last complete checkpoint is $tmp/g.h5 (step [0-9]*)" "$tmp/g.err" ||
      fail "7: the message does not name the last checkpoint"
  else
    grep -q "ending the job; rank 0 writes the checkpoints: $tmp/g.h5 holds the last complete one" "$tmp/g.err" ||
      fail "7: rank 1's message does not name the checkpoint rank 0 writes"
  fi
  sleep 1
  # gone: no process, or a zombie (a container's init may not reap the orphans mpirun leaves)
  state=$(ps -o stat= -p "$victim" 2>/dev/null)
  if [ -n "$state" ] && [ "${state:0:1}" != Z ]; then fail "7: the stopped rank $stopped outlived the job"; kill -KILL "$victim"; fi
  "$cmp" "$tmp/g.h5" "$tmp/g.h5" >/dev/null || fail "7: the last checkpoint does not load"
  echo "7: rank $stopped stopped: the job ended after $waited s (timeout 3 s)"
done
mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --resume "$tmp/g.h5" \
  --stop-after 400 2> "$tmp/g2.err" > /dev/null
grep -q "resumed from" "$tmp/g2.err" || fail "7: the last checkpoint does not resume"

# 8: refusals before training
refusal() {  # NAME STATUS MESSAGE ARGS...: the job's status, the message once, no abort
  local name=$1 want=$2 msg=$3; shift 3
  mpi "$@" 2> "$tmp/r.err" > /dev/null; local rc=$?
  [ "$rc" = "$want" ] || { cat "$tmp/r.err"; fail "8: $name: exit $rc, not $want"; }
  [ "$(grep -c -- "$msg" "$tmp/r.err")" = 1 ] || { cat "$tmp/r.err"; fail "8: $name: the refusal is not said once"; }
  ! grep -q -e MPI_ABORT -e "stopped by the MPI runtime" -e "^rank 1: " "$tmp/r.err" ||
    { cat "$tmp/r.err"; fail "8: $name: more than the refusal"; }
}
refusal "unknown option" 2 '^qat train: unknown option "--bogus"' --model mlp --data "$data" --bogus
refusal "missing data" 1 '^qat: /nonexistent: cannot read the data set' --model mlp --data /nonexistent
refusal "rank 0's log" 2 "^qat: --log $tmp/e.csv: the file's columns are not this run's" "${common[@]}" \
  --resume "$tmp/c.h5" --log "$tmp/e.csv"
# rank 1 alone refuses (its own command line, mpirun's MPMD form): it says why, prefixed with its rank, and
# rank 0's JSON names it
mpirun --oversubscribe -x LSAN_OPTIONS -x ASAN_OPTIONS -np 1 "$bin" train --model mlp --data "$data" --json : \
  -np 1 "$bin" train --model mlp --data "$data" --out /nonexistent-dir/x.h5 2> "$tmp/r.err" > "$tmp/r.out"; rc=$?
[ "$rc" = 1 ] || { cat "$tmp/r.err"; fail "8: rank 1's refusal: exit $rc, not 1"; }
[ "$(grep -c "^rank 1: qat: --out /nonexistent-dir/x.h5" "$tmp/r.err")" = 1 ] || { cat "$tmp/r.err"; fail "8: rank 1's refusal is not said once"; }
grep -q '"error": "rank 1 could not start' "$tmp/r.out" || { cat "$tmp/r.out"; fail "8: rank 0's JSON does not name rank 1"; }
! grep -q -e MPI_ABORT -e "stopped by the MPI runtime" "$tmp/r.err" || { cat "$tmp/r.err"; fail "8: rank 1's refusal: an abort"; }

# 9: stop and save by SIGUSR1 to mpirun
rm -f "$tmp/u.h5"
mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --out "$tmp/u.h5" \
  2> "$tmp/u.err" > /dev/null &
job=$!
for _ in $(seq 100); do grep -q " parameters, " "$tmp/u.err" 2>/dev/null && break; sleep 0.1; done
sleep 2
pkill -USR1 -P "$job" -x mpirun || fail "9: no mpirun to signal"
wait "$job"; rc=$?
[ "$rc" = 130 ] || { tail -5 "$tmp/u.err"; fail "9: SIGUSR1: exit $rc, not 130"; }
grep -q "interrupted at step [0-9]*; wrote $tmp/u.h5" "$tmp/u.err" || { tail -5 "$tmp/u.err"; fail "9: no checkpoint written"; }
mpi --model lenet --qat --limit-train 6400 --limit-test 200 --epochs 20 --data "$data" --resume "$tmp/u.h5" \
  --stop-after 400 2> "$tmp/u2.err" > /dev/null
grep -q "resumed from" "$tmp/u2.err" || fail "9: the checkpoint SIGUSR1 wrote does not resume"

# 10: the other commands are not jobs: each rank would run the whole command and write the same files
mpirun -np 2 --oversubscribe -x LSAN_OPTIONS -x ASAN_OPTIONS "$bin" export --checkpoint "$tmp/c.h5" \
  --out "$tmp/x.qat.h5" 2> "$tmp/x.err"; rc=$?
[ "$rc" = 2 ] || { cat "$tmp/x.err"; fail "10: export under mpirun: exit $rc, not 2"; }
grep -q "^qat export: only train runs as an MPI job (here 2 processes would each run it)" "$tmp/x.err" ||
  { cat "$tmp/x.err"; fail "10: export under mpirun does not say why"; }
[ ! -e "$tmp/x.qat.h5" ] || fail "10: export under mpirun wrote its file"

if [ $fails = 0 ]; then echo "mpi_train: 10 checks passed"; exit 0; fi
echo "mpi_train: $fails failed"; exit 1
