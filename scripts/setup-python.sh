#!/usr/bin/env bash
# The Python packages the tests (and, with `bench`, the benchmarks) run,
# from PyPI, in virtual environments of the project's own, ignored by git:
#   .venv/        tests/requirements.txt  (onnxruntime, numpy)
#   .venv-bench/  bench/requirements.txt  (a current torch, onnxruntime, ...)
# Built on Debian's python3 (python3-venv is installed when missing), so a
# fresh Debian machine and CI get the same interpreter. Does nothing when
# the environment already holds what the requirements file pins. Prints
# nothing on success; exit 1 (with the reason) when pip fails: the tests
# that need these packages then fail, they never skip silently.
#   scripts/setup-python.sh [test|bench]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-test}
case $kind in
  test) venv=$root/.venv req=$root/tests/requirements.txt ;;
  bench) venv=$root/.venv-bench req=$root/bench/requirements.txt ;;
  *) echo "setup-python: unknown kind \"$kind\" (test or bench)" >&2; exit 2 ;;
esac
py=/usr/bin/python3
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  QAT_EXTRA_PKGS="python3-venv" bash "$root/scripts/setup-deps.sh"
fi
stamp=$venv/.requirements
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then exit 0; fi
echo "setup-python: installing $(grep -v '^#' "$req" | tr '\n' ' ')into ${venv#$root/}/ (PyPI)" >&2
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" ||
  { echo "setup-python: pip could not install $req into $venv (is PyPI reachable?)" >&2; exit 1; }
cp "$req" "$stamp"
