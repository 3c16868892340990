"""Runs an ONNX model qat exported (`export --onnx`) with onnxruntime
(PyPI, in .venv/: scripts/setup-python.sh), on the MNIST test set or on
float inputs from a file, and writes what a comparison with qat's integer
engine needs:

  ort_run.py MODEL.onnx --mnist DIR  --pred FILE --logits FILE [options]
  ort_run.py MODEL.onnx --input F32 --shape C,H,W|F --logits FILE [options]

  --mnist DIR        t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz] in DIR
  --input FILE       float32 little-endian inputs, [n, shape] (n follows from the size)
  --shape S          per-sample input shape for --input (e.g. 2,10,9 or 784)
  --pred FILE        each sample's predicted label (argmax of the logits), one a line
  --logits FILE      the float32 logits, [n, K] little-endian
  --output NAME      the graph output --logits writes (default: the first), as
                     float32 [n, its per-sample size] (e.g. "input.q", the input
                     integers, in a model whose outputs include it)
  --optimized FILE   onnxruntime writes the graph it runs (after its QDQ fusion) here
  --int8-allowed 0|1 session.qdqisint8allowed (default 1: on x86 onnxruntime
                     fuses int8-activation Conv/MatMul only when it is set)
  --batch B          samples per run (default 500)
  --level L          graph optimization: all (default: QDQ fusion into integer
                     kernels), basic, extended, or disabled (the graph's float
                     semantics, each QuantizeLinear/DequantizeLinear run as such)

The MNIST input is the raw pixels as floats (0..255): a model qat trains
carries its normalization, and the ONNX graph starts with it. Prints one JSON line:
samples, classes, accuracy (with --mnist), seconds, the onnxruntime version.
Exit 2 on a bad command line, 1 when onnxruntime fails."""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def read_idx(path):
    """An IDX file of unsigned bytes (gzipped or not): its dimensions and data."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of bytes")
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * d:8 + 4 * d], "big") for d in range(rank)]
    off = 4 + 4 * rank
    if len(raw) - off != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(raw) - off} data bytes, dimensions say {int(np.prod(dims))}")
    return dims, np.frombuffer(raw, dtype=np.uint8, offset=off)


def load(a):
    if a.mnist:
        dims, img = read_idx(os.path.join(a.mnist, "t10k-images-idx3-ubyte"))
        _, lab = read_idx(os.path.join(a.mnist, "t10k-labels-idx1-ubyte"))
        return img.astype(np.float32).reshape(dims[0], -1), lab
    per = int(np.prod(a.shape))
    x = np.fromfile(a.input, dtype="<f4")
    if x.size % per:
        sys.exit(f"ort_run.py: {a.input}: not a whole number of samples of {per} floats")
    return x.reshape(-1, per), None


def main():
    p = argparse.ArgumentParser(description="Run a qat ONNX export with onnxruntime.")
    p.add_argument("model")
    p.add_argument("--mnist")
    p.add_argument("--input")
    p.add_argument("--shape", type=lambda s: [int(v) for v in s.split(",")])
    p.add_argument("--pred")
    p.add_argument("--logits")
    p.add_argument("--output")
    p.add_argument("--optimized")
    p.add_argument("--int8-allowed", default="1", choices=["0", "1"])
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--level", default="all", choices=["all", "basic", "extended", "disabled"])
    a = p.parse_args()
    if bool(a.mnist) == bool(a.input):
        p.error("one of --mnist or --input")
    if a.input and not a.shape:
        p.error("--input needs --shape")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3  # errors only: not the warning that the optimized model is hardware-specific
    so.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[a.level]
    so.add_session_config_entry("session.qdqisint8allowed", a.int8_allowed)
    if a.optimized:
        so.optimized_model_filepath = a.optimized
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    x, labels = load(a)
    inp = sess.get_inputs()[0]
    # the model's input rank says how a sample is laid out: [N, C, H, W] or [N, F]
    shape = a.shape if a.shape else ([x.shape[1]] if len(inp.shape) == 2 else [1, 28, 28])
    n, outs = x.shape[0], []
    names = [o.name for o in sess.get_outputs()]
    if a.output and a.output not in names:
        raise ValueError(f"the model has no output {a.output} (it has {', '.join(names)})")
    want = names.index(a.output) if a.output else 0
    t0 = time.perf_counter()
    for s in range(0, n, a.batch):
        b = x[s:s + a.batch].reshape([-1] + shape)
        outs.append(sess.run(None, {inp.name: b})[want])
    secs = time.perf_counter() - t0
    logits = np.concatenate(outs).astype("<f4").reshape(n, -1)
    pred = logits.argmax(axis=1)  # the first maximum, as qat's argmax
    if a.pred:
        with open(a.pred, "w") as f:
            f.write("".join(f"{int(v)}\n" for v in pred))
    if a.logits:
        logits.tofile(a.logits)
    out = {"model": a.model, "samples": n, "classes": int(logits.shape[1]), "seconds": secs,
           "onnxruntime": ort.__version__}
    if labels is not None:
        out["accuracy"] = float((pred == labels).mean())
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - one line, not a traceback
        sys.stderr.write(f"ort_run.py: {e}\n")
        sys.exit(1)
