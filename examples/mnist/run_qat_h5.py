#!/usr/bin/env python3
"""Runs a qat quantized checkpoint (.qat.h5) with h5py and numpy alone,
from docs/quantized-model-format.md: the integer program, bit for bit as
the C integer engine runs it.

  run_qat_h5.py MODEL.qat.h5 INPUT.f32 N OUTPUT.i32

INPUT.f32: N float32 samples of the model's input shape (raw little-endian).
OUTPUT.i32: the N x n_outputs output integers (int32), written raw.
Prints the predicted class of each sample. Exit status 1 on a bad file."""
import sys
import h5py
import numpy as np

def mbqm(x, m, s):
    """gemmlowp's MultiplyByQuantizedMultiplier on int64 arrays (m, s broadcast)."""
    x = np.asarray(x, np.int64)
    left, right = np.maximum(s, 0), np.maximum(-s, 0)
    a = np.clip(x << left, -2**31, 2**31 - 1)
    ab = a * np.int64(m)
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    t = ab + nudge
    b = np.where(t >= 0, t >> 31, -((-t) >> 31))          # truncating division by 2^31
    mask = (np.int64(1) << right) - 1
    return (b >> right) + ((b & mask) > (mask >> 1) + (b < 0))

def quantize(x, g):
    """The input quantization: x·(1/scale) in float32, round half to even."""
    inv = np.float32(1.0) / np.float32(g.attrs["scale"])
    q = np.rint(x.astype(np.float32) * inv).astype(np.int64) + int(g.attrs["zero_point"])
    return np.clip(q, int(g.attrs["qmin"]), int(g.attrs["qmax"]))

def windows(x, k, s):
    """[N, C, H, W] -> [N, C, OH, OW, k, k] views of the pooling/conv windows."""
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    st = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, c, oh, ow, k, k),
                                           (st[0], st[1], st[2] * s, st[3] * s, st[2], st[3]))

def run_op(op, x, zp_in):
    kind = op.attrs["kind"]
    if isinstance(kind, bytes):
        kind = kind.decode()
    n = x.shape[0]
    zp, lo, hi = int(op.attrs["output_zero_point"]), int(op.attrs["act_min"]), int(op.attrs["act_max"])
    if kind in ("linear", "conv2d"):
        if "multiplier" not in op:
            sys.exit(f"op {op.attrs['name']}: sub-channel weights have no integer program (docs)")
        w = op["weight"][...].astype(np.int64)
        wzp = op["weight_zero_point"][...].astype(np.int64)       # one per block
        blocks = tuple(a // b for a, b in zip(w.shape, wzp.shape))
        w = w - np.kron(wzp, np.ones(blocks, np.int64))           # each block's zero point, expanded
        bias, m, s = op["bias"][...].astype(np.int64), op["multiplier"][...], op["shift"][...]
        xi = x.astype(np.int64) - zp_in
        if kind == "linear":
            acc = xi.reshape(n, -1) @ w.T + bias                   # [N, out]
            mm, ss = m.astype(np.int64)[None, :], s.astype(np.int64)[None, :]
        else:
            k, st, p = int(op.attrs["kernel"]), int(op.attrs["stride"]), int(op.attrs["padding"])
            xp = np.pad(xi, ((0, 0), (0, 0), (p, p), (p, p)))      # padding: real 0, i.e. x - zp = 0
            win = windows(np.ascontiguousarray(xp), k, st)          # [N, C, OH, OW, k, k]
            acc = np.einsum("ncyxij,ocij->noyx", win, w) + bias[None, :, None, None]
            mm, ss = m.astype(np.int64)[None, :, None, None], s.astype(np.int64)[None, :, None, None]
        return np.clip(zp + mbqm(acc, mm, ss), lo, hi)
    if kind == "maxpool2d":
        return windows(np.ascontiguousarray(x), int(op.attrs["kernel"]), int(op.attrs["stride"])).max(axis=(4, 5))
    if kind == "avgpool2d":
        sums = windows(np.ascontiguousarray(x - zp_in), int(op.attrs["kernel"]), int(op.attrs["stride"])).sum(axis=(4, 5))
        return np.clip(zp + mbqm(sums, int(op["multiplier"][0]), int(op["shift"][0])), lo, hi)
    if kind == "flatten":
        return x.reshape(n, -1)
    if kind == "relu":
        return np.clip(x, lo, hi)
    raise ValueError(f"unknown op kind {kind}")

def main():
    path, inp, n, outp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with h5py.File(path, "r") as f:
        fmt = f.attrs["format"]
        if (fmt.decode() if isinstance(fmt, bytes) else fmt) != "qat-quantized-model" or int(f.attrs["version"]) != 1:
            sys.exit(f"{path}: not a version 1 qat quantized model")
        shape = [int(d) for d in np.atleast_1d(f.attrs["input_shape"])]
        x = np.fromfile(inp, np.float32, count=n * int(np.prod(shape))).reshape([n] + shape)
        q, zp = quantize(x, f["input"]), int(f["input"].attrs["zero_point"])
        for i in range(int(f.attrs["n_ops"])):
            op = f["ops"][str(i)]
            q = run_op(op, q, zp)
            zp = int(op.attrs["output_zero_point"])
    q.astype(np.int32).tofile(outp)
    print(" ".join(str(c) for c in q.reshape(n, -1).argmax(axis=1)))

main()
