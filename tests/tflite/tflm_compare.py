"""A .tflite file exported by qat, run by TensorFlow Lite for Microcontrollers.

    tflm_compare.py MODEL.tflite INPUTS.npy OUTPUTS.npy [LIMIT]

INPUTS.npy, OUTPUTS.npy: what tests/tflite/tflite_io wrote (the input
integers as TFLite's input tensor takes them, and the integer engine's
output integers). Runs TFLite Micro's interpreter (the tflite-micro
package from PyPI: its reference kernels, the ones a device build uses
without an optimized kernel library) on every sample, one at a time as a
device would (the first LIMIT samples, when given), and compares the
output integers one by one. Then prints
the arena TFLite Micro used for the model, from its recording allocator:

  head: the activation tensors, as TFLite Micro's memory planner lays
        them out (the same on any platform);
  tail: what lives as long as the interpreter (per-channel multipliers
        and shifts, tensor and node structures; sized on this 64-bit
        host, so larger than on a 32-bit device).

Prints one line and one JSON line; exit 1 when an output differs from
the engine's, 2 on bad input.
"""
import json
import os
import re
import sys
import tempfile

import numpy as np
from tflite_micro.python.tflite_micro import runtime

ARENA = 4 * 1024 * 1024  # more than any model here needs; the recording allocator reports what was used


def allocations(it):
    """The recording allocator's report (printed by C++ on stderr) as {name: bytes}."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+") as f:
        os.dup2(f.fileno(), 1), os.dup2(f.fileno(), 2)
        try:
            it.print_allocations()
        finally:
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
        f.seek(0)
        text = f.read()
    out = {}
    for key in ("total", "head", "tail"):
        m = re.search(rf"Arena allocation {key} (\d+) bytes", text)
        if not m:
            raise SystemExit(f"tflm_compare: no arena {key} in TFLite Micro's report:\n{text}")
        out[key] = int(m.group(1))
    return out


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    path, xin, yout = sys.argv[1:4]
    x, want = np.load(xin), np.load(yout)
    if len(sys.argv) == 5:
        x, want = x[: int(sys.argv[4])], want[: int(sys.argv[4])]
    it = runtime.Interpreter.from_file(path, arena_size=ARENA)
    d = it.get_input_details(0)
    if d["dtype"] != np.int8:
        print(f"tflm_compare: {path}: input {d['dtype']}: want int8", file=sys.stderr)
        return 2
    got = []
    for i in range(x.shape[0]):
        it.set_input(x[i : i + 1].reshape(d["shape"]), 0)
        it.invoke()
        got.append(np.array(it.get_output(0)).reshape(-1))
    got = np.stack(got)
    if got.shape != want.shape:
        print(f"tflm_compare: output shape {got.shape}, the engine's {want.shape}", file=sys.stderr)
        return 1
    diff = np.any(got != want, axis=1)
    arena = allocations(it)
    figures = {"model": path, "samples": int(x.shape[0]), "micro_differ": int(diff.sum()),
               "micro_max_step": int(np.abs(got.astype(np.int32) - want).max()),
               "arena_total": arena["total"], "arena_head": arena["head"], "arena_tail": arena["tail"]}
    print(f"TFLite Micro: {x.shape[0] - diff.sum()}/{x.shape[0]} samples with every output integer equal "
          f"(largest difference {figures['micro_max_step']}); arena {arena['total']} bytes "
          f"(activations {arena['head']}, persistent {arena['tail']})")
    print(json.dumps(figures))
    return 1 if figures["micro_differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
