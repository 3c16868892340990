#!/usr/bin/env python3
"""Runs a qat quantized model file (.qat.h5, version 2 to 5) with h5py and
numpy alone, from docs/quantized-model-format.md and docs/subchannel.md: the
integer program, bit for bit as the C integer engine runs it, sub-channel
(blockwise) weights, the input normalization and the average pools that keep
their input's quantization (rounding "divide") included.

  run_qat_h5.py MODEL.qat.h5 INPUT.f32 N OUTPUT.i32
  run_qat_h5.py MODEL.qat.h5 INPUT.u8 N OUTPUT.i32 --u8

INPUT.f32: N float32 samples of the model's input shape (raw little-endian):
the raw samples when the file has a normalization, which is applied first.
With --u8, INPUT.u8 holds N samples of raw bytes, each mapped through the
per-channel table of 256 input integers the normalization gives.
OUTPUT.i32: the N x outputs output integers (int32), written raw.
Prints the predicted class of each sample. Exit status 1 on a bad file, 2
on a bad command line."""
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

SINGLE = [False]  # the file's requant_rounding is "single" (version 5), set by main

def mbqm_single(x, m, s):
    """One rounding of the exact product: floor((x*m + 2^(t-1)) / 2^t), t = 31 - s, saturated to int32."""
    t = 31 - np.clip(np.asarray(s, np.int64), -31, 30)
    v = (np.asarray(x, np.int64) * np.int64(m) + (np.int64(1) << (t - 1))) >> t
    return np.clip(v, -2**31, 2**31 - 1)

def requant(x, m, s):
    """The file's requantizing multiply: mbqm, or mbqm_single where the file rounds once."""
    return mbqm_single(x, m, s) if SINGLE[0] else mbqm(x, m, s)

def quantize_multiplier(M):
    """The contract's QuantizeMultiplier on float64 arrays: M = m0 * 2^(shift - 31), m0 in [2^30, 2^31)."""
    q, e = np.frexp(M)
    m0 = np.floor(q * 2.0**31 + 0.5).astype(np.int64)     # exact: q * 2^31 < 2^31, half away from zero (M >= 0)
    e = e.astype(np.int64)
    top = m0 == 2**31
    m0, e = np.where(top, m0 // 2, m0), np.where(top, e + 1, e)
    low = e < -31
    m0, e = np.where(low, 0, m0), np.where(low, 0, e)
    high = e > 30
    return np.where(high, 2**31 - 1, m0), np.where(high, 30, e)

def normalize(x, norm):
    """The input normalization (version 4, /normalization): per element of channel c, in float32
    with each operation rounded, ((x / divisor) - mean[c]) / std[c]; channels are axis 1 of
    [N, C, H, W] (one channel: every element)."""
    x = x.astype(np.float32)
    if norm is None:
        return x
    c = int(norm.attrs["channels"])
    d = np.float32(norm.attrs["divisor"])
    mean, std = norm["mean"][...].astype(np.float32), norm["std"][...].astype(np.float32)
    shape = (1, c) + (1,) * (x.ndim - 2) if c > 1 else (1,) * x.ndim
    return ((x / d) - mean.reshape(shape)) / std.reshape(shape)

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

def div_round(acc, n):
    """A pool that keeps its input's quantization: acc / n rounded half away from zero, as C's
    truncating (acc + n/2) / n for acc > 0 and (acc - n/2) / n otherwise (n >= 1, per window)."""
    return np.sign(acc) * ((np.abs(acc) + n // 2) // n)

def rounding(op):
    """An average pool's rule: "multiplier" (absent: the requantization) or "divide"."""
    r = text(op.attrs["rounding"]).rstrip("\0") if "rounding" in op.attrs else "multiplier"
    if r not in ("multiplier", "divide"):
        sys.exit(f"op {text(op.attrs['name'])}: unknown rounding {r!r}")
    return r

def window_op(op):
    (kh, kw), (sh, sw), (ph, pw) = pair(op, "kernel"), pair(op, "stride"), pair(op, "padding")
    return kh, kw, sh, sw, ph, pw

def weight_of(op):
    """The weight's integers in its own shape, unpacked (version 3 packs <= 4 bits: low bits first,
    two's complement for signed storage), and its type: shape, blocks, scales, zero points."""
    ds = op["weight"]
    if "packed_bits" in ds.attrs:
        pb, shape = int(ds.attrs["packed_bits"]), [int(d) for d in ds.attrs["shape"]]
        n, per = int(np.prod(shape)), 8 // int(ds.attrs["packed_bits"])
        b = ds[...].astype(np.int64)
        w = (b[:, None] >> (np.arange(per) * pb)) & ((1 << pb) - 1)
        w = w.reshape(-1)[:n]
        if text(ds.attrs["storage_type"]).startswith("i"):
            w = np.where(w >= 1 << (pb - 1), w - (1 << pb), w)
        w = w.reshape(shape)
    else:
        w = ds[...].astype(np.int64)
    tshape = [int(d) for d in ds.attrs["quantized_shape"]] if "quantized_shape" in ds.attrs else list(w.shape)
    block = [int(d) for d in np.atleast_1d(ds.attrs["block_sizes"])]
    if "weight_subscale" in op:  # compact block scales: row scale · sub-scale, zero points 0
        q, pshape = subscales(op, tshape, block)
        scale = (op["weight_row_scale"][...].astype(np.float32)[:, None] * q.astype(np.float32)).reshape(pshape)
        return w, tshape, block, scale, np.zeros(pshape, np.int64)
    return w, tshape, block, op["weight_scale"][...], op["weight_zero_point"][...].astype(np.int64)

def subscales(op, tshape, block):
    """Compact block scales' sub-scales [rows, J] (two 4-bit ones to a byte, low first, or one a byte)
    and the parameters' shape ceil(tshape / block)."""
    pshape = [-(-n // b) for n, b in zip(tshape, block)]
    bits, count = int(np.atleast_1d(op["weight_subscale"].attrs["bits"])[0]), int(np.prod(pshape))
    pb = 4 if bits <= 4 else 8
    raw = op["weight_subscale"][...].astype(np.int64)
    q = ((raw[:, None] >> (np.arange(8 // pb) * pb)) & ((1 << pb) - 1)).reshape(-1)[:count]
    assert q.min() >= 1 and q.max() <= (1 << bits) - 1
    return q.reshape(pshape[0], -1), pshape

def expand(params, tshape, block):
    """Each element's block parameter (a ragged last block included): params[i // block]."""
    idx = np.ix_(*[np.arange(n) // b for n, b in zip(tshape, block)])
    return params[idx]

def blockwise(tshape, block):
    """Not per-tensor and not per output channel: the sums run block by block (docs/subchannel.md)."""
    whole = [b == n for n, b in zip(tshape, block)]
    return not (all(whole) or (block[0] == 1 and all(whole[1:])))

def block_sums(cols, wz, bj, J, bias, convert):
    """Σ_j convert(Σ_{k in block j} cols[..., k]·wz[o, k], j) + bias[o]: [..., O]. convert is
    MBQM(P, bm[o, j], bs[o, j]), or for compact block scales the exact product P·q[o, j]."""
    acc = np.zeros(cols.shape[:-1] + (wz.shape[0],), np.int64) + bias
    for j in range(J):
        ks = np.nonzero(bj == j)[0]
        part = cols[..., ks] @ wz[:, ks].T                    # int32 partial sums, the bounds keep them in range
        acc += convert(part, j)
    assert np.abs(acc).max(initial=0) <= 2**31 - 1            # the loader's bounds: the total stays in int32
    return acc

def product(op, xi, n, s_in):
    """linear / conv2d: int64 accumulators [N, O] or [N, O, OH, OW] at the output multiplier's input scale."""
    w, tshape, block, scale, wzp = weight_of(op)
    O = w.shape[0]
    wz = w.reshape(O, -1) - expand(wzp, tshape, block).reshape(O, -1)   # each block's zero point, expanded
    bias = op["bias"][...].astype(np.int64)
    kind = text(op.attrs["kind"])
    sub = blockwise(tshape, block)
    rows = np.arange(O) // block[0]                           # a row's group of parameters
    if sub and "weight_subscale" in op:  # compact block scales: A_j = P_j · q_j, exact
        qj = subscales(op, tshape, block)[0][rows]            # [O, J]
        J = qj.shape[1]
        convert = lambda part, j, sl, qj=qj: part * qj[sl, j]
        bj = expand(np.arange(scale.size).reshape(scale.shape), tshape, block).reshape(O, -1)[0]
    elif sub:  # each block's conversion, derived from the scales by the file's rule
        s_acc = op["bias_scale"][...].astype(np.float64)
        sc = scale.reshape(scale.shape[0], -1)                # [groups, J]
        J = sc.shape[1]
        first = np.arange(scale.shape[0]) * block[0]          # the first row of each group
        M = np.float64(s_in) * sc.astype(np.float64) / s_acc[first][:, None]
        bm, bs = quantize_multiplier(M)
        bm, bs = bm[rows], bs[rows]
        convert = lambda part, j, sl, bm=bm, bs=bs: requant(part, bm[sl, j], bs[sl, j])
        bj = expand(np.arange(scale.size).reshape(scale.shape), tshape, block).reshape(O, -1)[0]
    if kind == "linear":
        cols = xi.reshape(n, -1)
        if sub:
            return block_sums(cols, wz, bj, J, bias, lambda part, j: convert(part, j, slice(None))), (None, slice(None))
        return cols @ wz.T + bias, (None, slice(None))
    kh, kw, sh, sw, ph, pw = window_op(op)
    g = int(op.attrs["groups"])
    xp = np.pad(xi, ((0, 0), (0, 0), (ph, ph), (pw, pw)))     # padding: real 0, i.e. x - zp = 0
    cg, og = xp.shape[1] // g, O // g
    parts = []
    for k in range(g):                                        # each group: its channels, its outputs
        win = windows(np.ascontiguousarray(xp[:, k * cg:(k + 1) * cg]), kh, kw, sh, sw)
        if sub:                                               # im2col rows c·kh·kw + ky·kw + kx
            cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(win.shape[0], win.shape[2], win.shape[3], -1)
            sl = slice(k * og, (k + 1) * og)
            acc = block_sums(cols, wz[sl], bj, J, bias[sl], lambda part, j, sl=sl: convert(part, j, sl))
            parts.append(acc.transpose(0, 3, 1, 2))
        else:
            parts.append(np.einsum("ncyxij,ocij->noyx", win, wz[k * og:(k + 1) * og].reshape(og, cg, kh, kw)))
    out = np.concatenate(parts, axis=1)
    return (out if sub else out + bias[None, :, None, None]), (None, slice(None), None, None)

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
        if "weight_subscale" in op:  # compact block scales: the output conversion derived from the row scale
            rows = np.arange(op["bias"].shape[0]) // int(np.atleast_1d(op["weight"].attrs["block_sizes"])[0])
            M = (np.float64(np.float32(tin[0].attrs["scale"])) * op["weight_row_scale"][...].astype(np.float64)[rows]
                 / np.float64(np.float32(out.attrs["scale"])))
            mult = lambda M=M: quantize_multiplier(M)
        elif "multiplier" not in op:
            sys.exit(f"op {text(op.attrs['name'])}: a version 2 file's sub-channel weights have no integer form "
                     "(qat loads such a file and gives it one; this reader does not)")
        acc, idx = product(op, x.astype(np.int64) - zp_in, n, np.float32(tin[0].attrs["scale"]))
        m, s = mult()
        return np.clip(zp + requant(acc, m[idx], s[idx]), lo, hi)
    if kind == "maxpool2d":
        kh, kw, sh, sw, ph, pw = window_op(op)
        xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-2**40)
        return windows(np.ascontiguousarray(xp), kh, kw, sh, sw).max(axis=(4, 5))
    if kind == "avgpool2d" and rounding(op) == "divide":  # the input's quantization kept
        kh, kw, sh, sw, ph, pw = window_op(op)
        pad = ((0, 0), (0, 0), (ph, ph), (pw, pw))
        sums = windows(np.ascontiguousarray(np.pad(x.astype(np.int64), pad)), kh, kw, sh, sw).sum(axis=(4, 5))
        inside = np.pad(np.ones((1, 1) + x.shape[2:], np.int64), pad)      # n: the window's input positions
        n_in = windows(np.ascontiguousarray(inside), kh, kw, sh, sw).sum(axis=(4, 5))
        return np.clip(div_round(sums, n_in), lo, hi)
    if kind == "avgpool2d":
        kh, kw, sh, sw, ph, pw = window_op(op)
        xp = np.pad(x.astype(np.int64) - zp_in, ((0, 0), (0, 0), (ph, ph), (pw, pw)))  # padding counts as real 0
        sums = windows(np.ascontiguousarray(xp), kh, kw, sh, sw).sum(axis=(4, 5))
        m, s = mult()
        return np.clip(zp + requant(sums, m[0], s[0]), lo, hi)
    if kind == "global_avgpool" and rounding(op) == "divide":
        return np.clip(div_round(x.astype(np.int64).sum(axis=(2, 3)), x.shape[2] * x.shape[3]), lo, hi)
    if kind == "global_avgpool":
        m, s = mult()
        return np.clip(zp + requant((x.astype(np.int64) - zp_in).sum(axis=(2, 3)), m[0], s[0]), lo, hi)
    if kind == "flatten":
        return x.reshape(n, -1)
    if kind == "relu":
        return np.clip(x, lo, hi)
    if kind == "add":                                          # TFLite's ADD
        m, s = mult()
        ls = int(op.attrs["left_shift"])
        a = requant((x.astype(np.int64) - zp_in) << ls, m[0], s[0])
        b = requant((ins[1].astype(np.int64) - int(tin[1].attrs["zero_point"])) << ls, m[1], s[1])
        return np.clip(zp + requant(a + b, m[2], s[2]), lo, hi)
    if kind == "mul":                                          # TFLite's MUL; b may be [C, 1, 1]
        m, s = mult()
        acc = (x.astype(np.int64) - zp_in) * (ins[1].astype(np.int64) - int(tin[1].attrs["zero_point"]))
        return np.clip(zp + requant(acc, m[0], s[0]), lo, hi)
    if kind == "concat":                                       # each input to the output's grid
        m, s = mult()
        parts = [np.clip(zp + requant(v.astype(np.int64) - int(t.attrs["zero_point"]), m[j], s[j]), lo, hi)
                 for j, (v, t) in enumerate(zip(ins, tin))]
        return np.concatenate(parts, axis=1)
    if kind == "lut":
        table = op["table"][...].astype(np.int64)
        return table[x.astype(np.int64) - int(tin[0].attrs["qmin"])]
    raise ValueError(f"unknown op kind {kind}")

def byte_table(norm, t):
    """The raw-byte table [C, 256]: each byte b as the float b through normalize and quantize,
    so it holds the float path's integers by construction."""
    c = int(norm.attrs["channels"]) if norm is not None else 1
    b = np.broadcast_to(np.arange(256, dtype=np.float32), (c, 256))
    return quantize(normalize(b[None, :, :, None], norm), t)[0, :, :, 0]

def main():
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return
    if len(args) not in (4, 5) or (len(args) == 5 and args[4] != "--u8") or not args[2].isdigit():
        print("usage: run_qat_h5.py MODEL.qat.h5 INPUT N OUTPUT.i32 [--u8]  (--help says more)", file=sys.stderr)
        sys.exit(2)
    path, inp, n, outp = args[0], args[1], int(args[2]), args[3]
    raw_bytes = len(args) == 5
    with h5py.File(path, "r") as f:
        if text(f.attrs["format"]) != "qat-quantized-model" or int(f.attrs["version"]) not in (2, 3, 4, 5):
            sys.exit(f"{path}: not a version 2, 3, 4 or 5 qat quantized model")
        if int(f.attrs["version"]) >= 5:
            r = text(f.attrs["requant_rounding"]).rstrip("\0")
            if r not in ("double", "single"):
                sys.exit(f"{path}: unknown requant_rounding {r!r}")
            SINGLE[0] = r == "single"
        tensors = f["tensors"]
        norm = f["normalization"] if "normalization" in f else None
        t_in, t_out = str(int(f.attrs["input"])), str(int(f.attrs["output"]))
        shape = [int(d) for d in np.atleast_1d(tensors[t_in].attrs["shape"])]
        count = n * int(np.prod(shape))
        if raw_bytes:  # each byte through its channel's table
            x = np.fromfile(inp, np.uint8, count=count).reshape([n] + shape)
            table = byte_table(norm, tensors[t_in])
            c = table.shape[0]
            chan = (np.arange(int(np.prod(shape))) // (int(np.prod(shape)) // c)).reshape(shape)
            vals = {int(t_in): table[chan[None], x]}
        else:
            x = np.fromfile(inp, np.float32, count=count).reshape([n] + shape)
            vals = {int(t_in): quantize(normalize(x, norm), tensors[t_in])}
        for i in range(int(f.attrs["n_ops"])):
            op = f["ops"][str(i)]
            vals[int(op.attrs["output"])] = run_op(op, vals, tensors)
        q = vals[int(t_out)]
    q.astype(np.int32).tofile(outp)
    print(" ".join(str(c) for c in q.reshape(n, -1).argmax(axis=1)))

main()
