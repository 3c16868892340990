#!/usr/bin/env python3
"""Runs a qat quantized model file (.qat.h5, version 2) with h5py and numpy
alone, from docs/quantized-model-format.md: the integer program, bit for bit
as the C integer engine runs it.

  run_qat_h5.py MODEL.qat.h5 INPUT.f32 N OUTPUT.i32

INPUT.f32: N float32 samples of the model's input shape (raw little-endian).
OUTPUT.i32: the N x outputs output integers (int32), written raw.
Prints the predicted class of each sample. Exit status 1 on a bad file."""
import sys
import h5py
import numpy as np

def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)

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

def quantize(x, t):
    """The input quantization: x·(1/scale) in float32, round half to even; NaN -> zero point."""
    inv = np.float32(1.0) / np.float32(t.attrs["scale"])
    v = x.astype(np.float32) * inv
    v = np.where(np.isnan(v), np.float32(0), v)
    q = np.rint(np.clip(v, -2**30, 2**30)).astype(np.int64) + int(t.attrs["zero_point"])
    return np.clip(q, int(t.attrs["qmin"]), int(t.attrs["qmax"]))

def pair(op, name):
    v = np.atleast_1d(op.attrs[name]).astype(int)
    return int(v[0]), int(v[1])

def windows(x, kh, kw, sh, sw):
    """[N, C, H, W] -> [N, C, OH, OW, kh, kw] views of the windows."""
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    st = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, c, oh, ow, kh, kw),
                                           (st[0], st[1], st[2] * sh, st[3] * sw, st[2], st[3]))

def window_op(op):
    (kh, kw), (sh, sw), (ph, pw) = pair(op, "kernel"), pair(op, "stride"), pair(op, "padding")
    return kh, kw, sh, sw, ph, pw

def product(op, xi, n):
    """linear / conv2d: int64 accumulators [N, O] or [N, O, OH, OW], bias added."""
    if "multiplier" not in op:
        sys.exit(f"op {text(op.attrs['name'])}: sub-channel weights have no single multiplier per channel")
    w = op["weight"][...].astype(np.int64)
    wzp = op["weight_zero_point"][...].astype(np.int64)       # one per block
    blocks = tuple(a // b for a, b in zip(w.shape, wzp.shape))
    w = w - np.kron(wzp, np.ones(blocks, np.int64))           # each block's zero point, expanded
    bias = op["bias"][...].astype(np.int64)
    if text(op.attrs["kind"]) == "linear":
        return xi.reshape(n, -1) @ w.T + bias, (None, slice(None))
    kh, kw, sh, sw, ph, pw = window_op(op)
    g = int(op.attrs["groups"])
    xp = np.pad(xi, ((0, 0), (0, 0), (ph, ph), (pw, pw)))     # padding: real 0, i.e. x - zp = 0
    cg, og = xp.shape[1] // g, w.shape[0] // g
    parts = []
    for k in range(g):                                        # each group: its channels, its outputs
        win = windows(np.ascontiguousarray(xp[:, k * cg:(k + 1) * cg]), kh, kw, sh, sw)
        parts.append(np.einsum("ncyxij,ocij->noyx", win, w[k * og:(k + 1) * og]))
    return np.concatenate(parts, axis=1) + bias[None, :, None, None], (None, slice(None), None, None)

def run_op(op, vals, tensors):
    kind = text(op.attrs["kind"])
    ins = [vals[int(i)] for i in np.atleast_1d(op.attrs["inputs"])]
    tin = [tensors[str(int(i))] for i in np.atleast_1d(op.attrs["inputs"])]
    out = tensors[str(int(op.attrs["output"]))]
    x, zp_in = ins[0], int(tin[0].attrs["zero_point"])
    n = x.shape[0]
    zp, lo, hi = int(out.attrs["zero_point"]), int(op.attrs["act_min"]), int(op.attrs["act_max"])
    mult = lambda: (op["multiplier"][...].astype(np.int64), op["shift"][...].astype(np.int64))
    if kind in ("linear", "conv2d"):
        acc, idx = product(op, x.astype(np.int64) - zp_in, n)
        m, s = mult()
        return np.clip(zp + mbqm(acc, m[idx], s[idx]), lo, hi)
    if kind == "maxpool2d":
        kh, kw, sh, sw, ph, pw = window_op(op)
        xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-2**40)
        return windows(np.ascontiguousarray(xp), kh, kw, sh, sw).max(axis=(4, 5))
    if kind == "avgpool2d":
        kh, kw, sh, sw, ph, pw = window_op(op)
        xp = np.pad(x.astype(np.int64) - zp_in, ((0, 0), (0, 0), (ph, ph), (pw, pw)))  # padding counts as real 0
        sums = windows(np.ascontiguousarray(xp), kh, kw, sh, sw).sum(axis=(4, 5))
        m, s = mult()
        return np.clip(zp + mbqm(sums, m[0], s[0]), lo, hi)
    if kind == "global_avgpool":
        m, s = mult()
        return np.clip(zp + mbqm((x.astype(np.int64) - zp_in).sum(axis=(2, 3)), m[0], s[0]), lo, hi)
    if kind == "flatten":
        return x.reshape(n, -1)
    if kind == "relu":
        return np.clip(x, lo, hi)
    if kind == "add":                                          # TFLite's ADD
        m, s = mult()
        ls = int(op.attrs["left_shift"])
        a = mbqm((x.astype(np.int64) - zp_in) << ls, m[0], s[0])
        b = mbqm((ins[1].astype(np.int64) - int(tin[1].attrs["zero_point"])) << ls, m[1], s[1])
        return np.clip(zp + mbqm(a + b, m[2], s[2]), lo, hi)
    if kind == "concat":                                       # each input to the output's grid
        m, s = mult()
        parts = [np.clip(zp + mbqm(v.astype(np.int64) - int(t.attrs["zero_point"]), m[j], s[j]), lo, hi)
                 for j, (v, t) in enumerate(zip(ins, tin))]
        return np.concatenate(parts, axis=1)
    if kind == "lut":
        table = op["table"][...].astype(np.int64)
        return table[x.astype(np.int64) - int(tin[0].attrs["qmin"])]
    raise ValueError(f"unknown op kind {kind}")

def main():
    path, inp, n, outp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with h5py.File(path, "r") as f:
        if text(f.attrs["format"]) != "qat-quantized-model" or int(f.attrs["version"]) != 2:
            sys.exit(f"{path}: not a version 2 qat quantized model")
        tensors = f["tensors"]
        t_in, t_out = str(int(f.attrs["input"])), str(int(f.attrs["output"]))
        shape = [int(d) for d in np.atleast_1d(tensors[t_in].attrs["shape"])]
        x = np.fromfile(inp, np.float32, count=n * int(np.prod(shape))).reshape([n] + shape)
        vals = {int(t_in): quantize(x, tensors[t_in])}
        for i in range(int(f.attrs["n_ops"])):
            op = f["ops"][str(i)]
            vals[int(op.attrs["output"])] = run_op(op, vals, tensors)
        q = vals[int(t_out)]
    q.astype(np.int32).tofile(outp)
    print(" ".join(str(c) for c in q.reshape(n, -1).argmax(axis=1)))

main()
