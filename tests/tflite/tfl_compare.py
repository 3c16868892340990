"""A .tflite file exported by qat against qat's integer engine.

    tfl_compare.py MODEL.tflite INPUTS.npy OUTPUTS.npy [--default]

INPUTS.npy, OUTPUTS.npy: what tests/tflite/tflite_io wrote (the input
integers as TFLite's input tensor takes them, and the integer engine's
output integers). Runs TFLite's interpreter (ai-edge-litert, PyPI) with
its reference kernels (BUILTIN_REF: no XNNPACK, no optimized kernels) on
every sample, in one batch, and compares the output integers one by one.
With --default, the default interpreter (optimized kernels and XNNPACK)
runs too and its differences are counted, not failed on.

Prints one line per interpreter and one JSON line; exit 1 when a
reference output differs from the engine's, 2 on bad input.
"""
import json
import sys

import numpy as np
from ai_edge_litert import interpreter as litert


def run(path, x, resolver):
    it = litert.Interpreter(model_path=path, experimental_op_resolver_type=resolver, num_threads=1)
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]
    if inp["dtype"] != np.int8 or out["dtype"] != np.int8:
        raise SystemExit(f"tfl_compare: {path}: input {inp['dtype']}, output {out['dtype']}: want int8")
    it.resize_tensor_input(inp["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(inp["index"], x)
    it.invoke()
    return it.get_tensor(out["index"]).reshape(x.shape[0], -1)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, xin, yout = args
    x, want = np.load(xin), np.load(yout)
    figures = {"model": path, "samples": int(x.shape[0])}
    got = run(path, x, litert.OpResolverType.BUILTIN_REF)
    if got.shape != want.shape:
        print(f"tfl_compare: output shape {got.shape}, the engine's {want.shape}", file=sys.stderr)
        return 1
    diff = np.any(got != want, axis=1)
    figures["reference_differ"] = int(diff.sum())
    figures["reference_max_step"] = int(np.abs(got.astype(np.int32) - want).max())
    agree = float(np.mean(got.argmax(1) == want.argmax(1))) if want.shape[1] > 1 else 1.0
    figures["reference_prediction_agreement"] = agree
    print(f"reference kernels: {x.shape[0] - diff.sum()}/{x.shape[0]} samples with every output integer equal "
          f"(largest difference {figures['reference_max_step']}), predictions agree {100 * agree:.2f} %")
    if "--default" in sys.argv:
        d = run(path, x, litert.OpResolverType.AUTO)
        dd = np.any(d != want, axis=1)
        figures["default_differ"] = int(dd.sum())
        figures["default_max_step"] = int(np.abs(d.astype(np.int32) - want).max())
        print(f"default interpreter (XNNPACK): {dd.sum()}/{x.shape[0]} samples differ "
              f"(largest difference {figures['default_max_step']})")
    print(json.dumps(figures))
    return 1 if figures["reference_differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
