#!/usr/bin/env bash
# Installs the Debian packages qat builds against, when they are missing.
# As root: apt-get; otherwise sudo; otherwise a message naming the packages.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libhdf5-dev libcunit1-dev zlib1g-dev)
# qat fit's choice is an integer program, solved by GLPK
pkgs+=(libglpk-dev)
# ONNX export: protobuf-c and its compiler, and the onnx.proto schema (and
# the checker the tests run) from Debian's python3-onnx
pkgs+=(libprotobuf-c-dev protobuf-c-compiler python3-onnx)
# TFLite export: flatc generates the flatbuffer builder from src/tflite/schema.fbs
pkgs+=(flatbuffers-compiler libflatbuffers-dev)
# data-parallel training (mpirun -np N qat train): optional for the
# library, which builds without it; the test suite's mpi_train needs both
pkgs+=(libopenmpi-dev openmpi-bin)
# fetch-mnist.sh downloads over HTTPS: a minimal Debian has neither curl nor the CA certificates
pkgs+=(curl ca-certificates)
# qat plot draws training logs with gnuplot (tests/test_plot is skipped without it)
pkgs+=(gnuplot-nox)
[ "${QAT_WITH_VALGRIND:-0}" = 1 ] && pkgs+=(valgrind)
# the test suite runs tools/run_qat_h5.py (the format document, in numpy)
[ "${QAT_WITH_PYTHON:-0}" = 1 ] && pkgs+=(python3-h5py python3-numpy)
# a caller's own additions (setup-python.sh: python3-venv)
[ -n "${QAT_EXTRA_PKGS:-}" ] && pkgs+=($QAT_EXTRA_PKGS)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup-deps: installing ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
  echo "setup-deps: missing packages ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
