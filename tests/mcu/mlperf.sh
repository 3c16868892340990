#!/usr/bin/env bash
# MLPerf Tiny's four models at their real input sizes through the
# microcontroller tests (tests/mcu/run.sh): ResNet-8 on 32x32x3, DS-CNN on
# 49x10, the 640-input autoencoder and MobileNetV1-0.25 on 96x96x3, each
# trained briefly on a small seeded set of its shape
# (tests/tflite/make_sets.py: accuracy is not the point), exported to C,
# and run on N test samples on the host, a Cortex-M4, a Cortex-M3 and
# aarch64: the same integers as qat's engine; ResNet-8 and the autoencoder
# also with 4-bit weights (packed two to a byte in the generated C), DS-CNN
# and MobileNet also with the small-RAM plan (--c-ram small), ResNet-8
# also with the single rounding (--rounding single, the same weights). Prints
# each one's flash, RAM and instructions per inference on the Cortex-M4.
#   mlperf.sh QAT_BIN CODEGEN_REF WORKDIR N PYTHON
# PYTHON: one with numpy (the tests' .venv). Exit 77 without the Arm
# toolchain or qemu (run.sh says so).
set -euo pipefail
bin=$1 ref=$2 work=$3 n=$4 py=$5
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
"$py" "$here/../tflite/make_sets.py" "$work/sets"
exec bash "$here/run.sh" "$bin" "$ref" "$work/sets/ic" "$work" "$n" resnet8-ic@"$work/sets/ic" \
  ds-cnn-kws@"$work/sets/kws" ae-ad@"$work/sets/ad" mobilenet-v1-vww@"$work/sets/vww" \
  resnet8-ic:w4a8@"$work/sets/ic" ae-ad:w4a8@"$work/sets/ad" ds-cnn-kws+small@"$work/sets/kws" \
  mobilenet-v1-vww+small@"$work/sets/vww" resnet8-ic+single@"$work/sets/ic"
