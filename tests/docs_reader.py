#!/usr/bin/env python3
"""An independent reader of qat's quantized model file (versions 1 to 4),
written from docs/quantized-model-format.md, docs/contract.md and
docs/subchannel.md alone (it shares no code with tools/run_qat_h5.py). It
runs the integer program with numpy and h5py, average pools that divide
(rounding "divide") included, and writes the output integers, which the
tests compare with the C integer engine's, bit for bit.

  docs_reader.py MODEL INPUT N OUTPUT [--u8] [--verify]

INPUT: N raw samples of the input tensor's shape, float32 (little-endian),
or bytes with --u8 (each byte taken as the float (float)b, through the
per-channel table of 256 input integers). Raw means before the file's
/normalization, which the reader applies.
OUTPUT: the N x K output integers as raw int32.
--form=FILE: check the numbers the reader derives rather than reads against
FILE (raw int32, written by the test from the program qat loaded): for each
linear and conv2d op, bias, bias_scale (float32 bits), multiplier and shift,
then for blockwise weights every block's conversion (multiplier, then shift,
one per scale), or with compact block scales every sub-scale. Exit 1 where they differ.
--verify: also recompute, from the documents' formulas, every stored
multiplier and shift, every per-channel bias_scale, every act_min/act_max
and every hard-swish table, and check sigmoid/tanh tables to one step;
exit 1 on any disagreement (for files the current qat writes).
Prints the predicted class of each sample (the first index of the largest
integer). Exit status 1 on an error, with the reason on stderr."""
import math
import sys

import h5py
import numpy as np

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
F32 = np.float32


class Bad(Exception):
    pass


# ---- attributes: numbers are 1-d arrays (one element for a single value), strings scalar bytes ----

def text(g, name):
    if name not in g.attrs:
        raise Bad(f"{g.name}: no attribute {name}")
    v = g.attrs[name]
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    if isinstance(v, (bytes, np.bytes_)):
        v = bytes(v).split(b"\0")[0].decode()
    return str(v)


def nums(g, name):
    if name not in g.attrs:
        raise Bad(f"{g.name}: no attribute {name}")
    return np.asarray(g.attrs[name]).reshape(-1)


def num(g, name):
    v = nums(g, name)
    if v.size != 1:
        raise Bad(f"{g.name}: attribute {name} has {v.size} elements, want 1")
    return v[0]


def ints(g, name):
    return [int(v) for v in nums(g, name)]


# ---- contract §5 ----------------------------------------------------------------------------

def quantize_multiplier(M):
    """QuantizeMultiplier of a finite double M >= 0: (m, shift)."""
    if not (M >= 0) or math.isinf(M):
        raise Bad(f"multiplier {M} is not a finite non-negative number")
    if M == 0:
        return 0, 0
    q, e = math.frexp(M)                     # M = q·2^e, q in [0.5, 1)
    m = math.floor(q * 2.0 ** 31 + 0.5)      # exact: q·2^31 has 22 fraction bits
    if m == 1 << 31:
        m, e = 1 << 30, e + 1
    if e < -31:
        return 0, 0
    if e > 30:
        return I32_MAX, 30
    return m, e


SINGLE = [False]  # the program's requant_rounding is "single" (version 5); set by Program


def mbqm(v, m, s):
    """The program's requantizing multiply: double or single rounding."""
    return mbqm_single(v, m, s) if SINGLE[0] else mbqm_double(v, m, s)


def mbqm_single(v, m, s):
    """One rounding of the exact product: floor((v*m + 2^(t-1)) / 2^t), t = 31 - s, saturated to int32."""
    v, m, s = np.asarray(v, np.int64), np.asarray(m, np.int64), np.asarray(s, np.int64)
    t = 31 - s
    return np.clip((v * m + np.left_shift(np.int64(1), t - 1)) >> t, I32_MIN, I32_MAX)


def mbqm_double(v, m, s):
    """MultiplyByQuantizedMultiplier, elementwise on int64 arrays (m >= 0)."""
    v, m, s = np.asarray(v, np.int64), np.asarray(m, np.int64), np.asarray(s, np.int64)
    left, right = np.maximum(s, 0), np.maximum(-s, 0)
    a = np.clip(np.left_shift(v, left), I32_MIN, I32_MAX)
    ab = a * m
    t = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    b = np.where(t >= 0, t >> 31, -((-t) >> 31))       # truncating division by 2^31
    mask = np.left_shift(np.int64(1), right) - 1
    return (b >> right) + ((b & mask) > ((mask >> 1) + (b < 0)))


def requant(v, m, s, zp, lo, hi):
    return np.clip(zp + mbqm(v, m, s), lo, hi)


def divide(acc, n):
    """acc > 0 ? (acc + n/2) / n : (acc - n/2) / n in C (n/2 and the division truncate toward zero)."""
    acc, n = np.asarray(acc, np.int64), np.asarray(n, np.int64)
    half = n // 2
    pos = (acc + half) // n                    # acc + half > 0: floor is truncation
    neg = -((half - acc) // n)                 # acc - half <= 0: truncation is minus the floor of its negation
    return np.where(acc > 0, pos, neg)


def int32(v, what):
    v = np.asarray(v)
    if v.size and (v.min() < I32_MIN or v.max() > I32_MAX):
        raise Bad(f"{what}: an int32 sum overflows")
    return v


# ---- the file --------------------------------------------------------------------------------

class Tensor:
    def __init__(self, g, prefix="", name=None, shape=None):
        self.name = name if name is not None else text(g, "name")
        self.shape = tuple(shape if shape is not None else ints(g, "shape"))
        self.scale = F32(num(g, prefix + "scale"))
        self.zp = int(num(g, prefix + "zero_point"))
        self.bits = int(num(g, prefix + "bits"))
        self.qmin, self.qmax = int(num(g, prefix + "qmin")), int(num(g, prefix + "qmax"))
        self.signed = text(g, prefix + "storage_type")[0] == "i"


def unpack(data, n, b, signed):
    per = 8 // b
    if data.size != (n * b + 7) // 8:
        raise Bad(f"packed weights: {data.size} bytes for {n} weights of {b} bits")
    i = np.arange(n)
    f = (data[i // per].astype(np.int64) >> ((i % per) * b)) & ((1 << b) - 1)
    if n % per and int(data[-1]) >> ((n % per) * b):
        raise Bad("packed weights: unused bits set in the last byte")
    return np.where(f >= 1 << (b - 1), f - (1 << b), f) if signed else f


class Op:
    pass


def read_weight(g, op, version):
    ds = g["weight"]
    a = ds.attrs
    op.wbits = int(num(ds, "bits"))
    op.wsigned = text(ds, "storage_type")[0] == "i"
    op.wqmin, op.wqmax = int(num(ds, "qmin")), int(num(ds, "qmax"))
    if version >= 3:
        shape = ints(ds, "shape")
        n = int(np.prod(shape))
        if "packed_bits" in a:
            w = unpack(ds[...].reshape(-1), n, int(num(ds, "packed_bits")), op.wsigned)
        else:
            w = ds[...].astype(np.int64).reshape(-1)
        qshape = ints(ds, "quantized_shape")
    else:
        w = ds[...].astype(np.int64)
        shape = list(w.shape)
        qshape = shape
        w = w.reshape(-1)
    op.wshape, op.qshape = shape, qshape
    op.block = ints(ds, "block_sizes")
    op.weight = w.reshape(shape[0], -1)                  # [O, K]: the row of output o, in k order
    want = tuple(-(-q // b) for q, b in zip(qshape, op.block))
    op.compact = "weight_subscale" in g
    if op.compact:  # compact block scales: s_w = row scale · sub-scale (exact in float32), zero points 0
        if version < 4 or any(k in g for k in ("weight_scale", "weight_zero_point", "weight_mlir", "bias_scale",
                                               "multiplier", "shift")):
            raise Bad(f"{op.name}: compact block scales with a dataset the rule derives, or before version 4")
        sb = g["weight_subscale"]
        op.sub_bits = int(num(sb, "bits"))
        if not 4 <= op.sub_bits <= 8:
            raise Bad(f"{op.name}: sub-scales of {op.sub_bits} bits")
        n_par = int(np.prod(want))
        qs = unpack(sb[...].reshape(-1), n_par, 4 if op.sub_bits <= 4 else 8, False)
        if qs.min() < 1 or qs.max() > (1 << op.sub_bits) - 1:
            raise Bad(f"{op.name}: a sub-scale outside [1, 2^bits - 1]")
        op.row_scale = g["weight_row_scale"][...].astype(F32)
        if op.row_scale.shape != (want[0],):
            raise Bad(f"{op.name}: weight_row_scale {op.row_scale.shape}, want ({want[0]},)")
        op.q = qs.reshape(want[0], -1)                    # [parameter rows, J]
        prod = op.row_scale[:, None] * op.q.astype(F32)   # float32 products, exact (16 + 8 bits)
        if (prod.astype(np.float64) != op.row_scale[:, None].astype(np.float64) * op.q).any():
            raise Bad(f"{op.name}: a row scale times a sub-scale is not exact in float32")
        op.wscale = prod.reshape(want)
        op.wzp = np.zeros(want, np.int64)
    else:
        op.wscale = g["weight_scale"][...].astype(F32)
        op.wzp = g["weight_zero_point"][...].astype(np.int64)
    if op.wscale.shape != want or op.wzp.shape != want:
        raise Bad(f"{op.name}: weight_scale {op.wscale.shape}, want ceil(quantized_shape / block_sizes) = {want}")
    op.bias = g["bias"][...].astype(np.int64)
    op.bias_scale = None if op.compact else g["bias_scale"][...].astype(F32)
    op.O, op.K = op.weight.shape
    b0 = op.block[0]
    whole = all(b == q for b, q in zip(op.block[1:], qshape[1:]))
    op.blockwise = not (whole and (b0 == 1 or b0 == qshape[0]))
    # j(k): the flat parameter index element k of row 0 uses
    coords = np.unravel_index(np.arange(op.K), qshape)
    pidx = tuple(c // b for c, b in zip(coords, op.block))
    op.jk = np.ravel_multi_index(pidx, want)
    op.J = op.wscale.size // op.wscale.shape[0]
    op.b0 = b0


def read_op(g, version):
    op = Op()
    op.kind, op.name = text(g, "kind"), text(g, "name")
    op.act_min, op.act_max = int(num(g, "act_min")), int(num(g, "act_max"))
    op.act = text(g, "activation") if "activation" in g.attrs else None
    if version >= 2:
        op.inputs, op.output = ints(g, "inputs"), int(num(g, "output"))
    if op.kind in ("conv2d", "maxpool2d", "avgpool2d"):
        k, s = ints(g, "kernel"), ints(g, "stride")
        p = ints(g, "padding") if "padding" in g.attrs else [0]
        if version == 1:
            k, s, p = k * 2, s * 2, p * 2
        (op.kh, op.kw), (op.sh, op.sw), (op.ph, op.pw) = k, s, p
    op.groups = int(num(g, "groups")) if "groups" in g.attrs else 1
    if op.kind in ("linear", "conv2d"):
        read_weight(g, op, version)
    op.rounding = text(g, "rounding") if "rounding" in g.attrs else "multiplier"
    if op.rounding not in ("multiplier", "divide") or (op.rounding == "divide" and "multiplier" in g):
        raise Bad(f"op {op.name}: rounding {op.rounding!r}")
    op.m = g["multiplier"][...].astype(np.int64) if "multiplier" in g else None
    op.s = g["shift"][...].astype(np.int64) if "shift" in g else None
    if op.kind == "add":
        op.left_shift = int(num(g, "left_shift"))
    if op.kind == "lut":
        op.function = text(g, "function")
        op.table = g["table"][...].astype(np.int64)
    return op


class Program:
    def __init__(self, path):
        f = h5py.File(path, "r")
        if text(f, "format") != "qat-quantized-model":
            raise Bad("not a qat quantized model")
        self.version = v = int(num(f, "version"))
        if v < 1 or v > 5:
            raise Bad(f"version {v}")
        SINGLE[0] = False
        if v >= 5:
            r = text(f, "requant_rounding")
            if r not in ("double", "single"):
                raise Bad(f"requant_rounding {r!r}")
            SINGLE[0] = r == "single"
        self.norm = None
        if v == 1:
            n_ops = int(num(f, "n_ops"))
            self.tensors = [Tensor(f["input"], name="input", shape=ints(f, "input_shape"))]
            self.ops = []
            for i in range(n_ops):
                g = f[f"ops/{i}"]
                op = read_op(g, 1)
                op.inputs, op.output = [i], i + 1
                self.tensors.append(Tensor(g, "output_", op.name, ints(g, "output_shape")))
                self.ops.append(op)
            self.input, self.output = 0, n_ops
        else:
            nt, no = int(num(f, "n_tensors")), int(num(f, "n_ops"))
            self.tensors = [Tensor(f[f"tensors/{t}"]) for t in range(nt)]
            self.ops = [read_op(f[f"ops/{i}"], v) for i in range(no)]
            self.input, self.output = int(num(f, "input")), int(num(f, "output"))
            if v >= 4 and "normalization" in f:
                g = f["normalization"]
                self.norm = dict(channels=int(num(g, "channels")), divisor=F32(num(g, "divisor")),
                                 mean=g["mean"][...].astype(F32), std=g["std"][...].astype(F32))
        for op in self.ops:
            if op.kind in ("linear", "conv2d") and op.compact:
                if not op.blockwise:
                    raise Bad(f"{op.name}: compact block scales on weights that are not blockwise")
                # subchannel.md, "Compact block scales": the accumulation scale s_x · s_r, the output
                # conversion of (s_x · s_r) / s_out, in double from the float32 scales
                sx, so = float(self.tensors[op.inputs[0]].scale), float(self.tensors[op.output].scale)
                sr = [float(op.row_scale[o // op.b0]) for o in range(op.O)]
                op.bias_scale = np.array([F32(sx * r) for r in sr], F32)
                ms = [quantize_multiplier((sx * r) / so) for r in sr]
                op.m, op.s = np.array([a for a, _ in ms], np.int64), np.array([b for _, b in ms], np.int64)
                continue
            if op.kind in ("linear", "conv2d") and op.blockwise:
                if op.m is None:
                    if v != 2:
                        raise Bad(f"{op.name}: a blockwise op without multipliers in a version-{v} file")
                    self.give_v2_integer_form(op)
                op.bm, op.bs = block_conversions(self, op)
        f.close()

    # ---- subchannel.md, "The accumulation scale": version 2's blockwise ops ----
    def give_v2_integer_form(self, op):
        tx, ty = self.tensors[op.inputs[0]], self.tensors[op.output]
        X = max(tx.zp - tx.qmin, tx.qmax - tx.zp)
        b = [float(op.bias[o]) * float(op.bias_scale[o]) for o in range(op.O)]
        scales = op.wscale.reshape(-1, op.J)
        new_bias, new_bs = op.bias.copy(), op.bias_scale.copy()
        op.m, op.s = np.zeros(op.O, np.int64), np.zeros(op.O, np.int64)
        for o0 in range(0, op.O, op.b0):
            rows = range(o0, min(o0 + op.b0, op.O))
            s_ref = scales[o0 // op.b0].max()
            for G in range(29, -32, -1):
                s_acc = F32(math.ldexp(float(tx.scale) * float(s_ref), -G))
                if not (np.isfinite(s_acc) and s_acc >= np.finfo(F32).tiny):
                    continue
                mo, so = quantize_multiplier(float(s_acc) / float(ty.scale))
                if mo == 0:
                    continue
                qs = [round_half_even(b[o] / float(s_acc)) for o in rows]
                if any(abs(q) > I32_MAX for q in qs):
                    continue
                conv = [quantize_multiplier(float(tx.scale) * float(sw) / float(s_acc)) for sw in scales[o0 // op.b0]]
                if all(bounds_hold(op, o, q, X, conv) for o, q in zip(rows, qs)):
                    for o, q in zip(rows, qs):
                        new_bias[o], new_bs[o], op.m[o], op.s[o] = q, s_acc, mo, so
                    break
            else:
                raise Bad(f"{op.name}: rows {o0}..: no accumulation scale")
        op.bias, op.bias_scale = new_bias, new_bs


def round_half_even(v):
    return int(np.rint(v))


def bounds_hold(op, o, bias, X, conv):
    """B1, B2, B3 of docs/subchannel.md for row o with bias `bias`."""
    zp = op.wzp.reshape(-1, op.J)[o // op.b0]
    d = np.abs(op.weight[o] - zp[op.jk])
    total = abs(bias)
    for j, (m, s) in enumerate(conv):
        P = X * int(d[op.jk == j].sum())
        if P > I32_MAX or (s > 0 and P * (1 << s) > I32_MAX):
            return False
        total += max(max(int(f(P, m, s)), -int(f(-P, m, s))) for f in (mbqm_double, mbqm_single))
    return total <= I32_MAX


# ---- running ---------------------------------------------------------------------------------

def quantize_floats(t, x):
    """The input quantization of float32 values (the normalization done)."""
    inv = F32(1) / t.scale                        # float32 division, then a float32 product
    v = x.astype(F32) * inv
    v = np.where(np.isnan(v), F32(0), v)          # NaN: the zero point
    r = np.clip(np.rint(v), t.qmin - t.zp, t.qmax - t.zp)
    return r.astype(np.int64) + t.zp


def normalize(p, x, mean, std):
    return ((x.astype(F32) / p.norm["divisor"]) - mean) / std


def quantize_input(p, x):
    """The input integers of raw float32 samples x [N, *shape]."""
    t = p.tensors[p.input]
    if p.norm:
        C = p.norm["channels"]
        bshape = (1, C) + (1,) * (len(t.shape) - 1) if C > 1 else (1,)
        x = normalize(p, x, p.norm["mean"].reshape(bshape), p.norm["std"].reshape(bshape))
    return quantize_floats(t, x)


def quantize_bytes(p, xb):
    """Raw bytes [N, *shape] through the table of each channel: the float path on (float)b."""
    t = p.tensors[p.input]
    n = xb.shape[0]
    C = p.norm["channels"] if p.norm else 1
    b = np.arange(256).astype(F32)
    table = np.stack([quantize_floats(t, normalize(p, b, p.norm["mean"][c], p.norm["std"][c]) if p.norm else b)
                      for c in range(C)])
    planes = xb.reshape(n, C, -1).astype(np.int64)
    return np.stack([table[c][planes[:, c]] for c in range(C)], axis=1).reshape((n,) + t.shape)


def columns(xd, op, c0, c1, OH, OW):
    """[N, (c1-c0)·kh·kw, OH·OW] of the padded x - zp, rows in the order c·kh·kw + ky·kw + kx."""
    n = xd.shape[0]
    taps = []
    for ky in range(op.kh):
        for kx in range(op.kw):
            taps.append(xd[:, c0:c1, ky:ky + op.sh * (OH - 1) + 1:op.sh, kx:kx + op.sw * (OW - 1) + 1:op.sw])
    t = np.stack(taps, axis=2)                            # [N, Cg, kh·kw, OH, OW]
    return t.reshape(n, (c1 - c0) * op.kh * op.kw, OH * OW)


def block_conversions(p, op):
    """(m, s) [ceil(O / b0), J]: each parameter row's block conversions, derived
    from the scales (quantized-model-format.md), with o0 its first row."""
    sx = float(p.tensors[op.inputs[0]].scale)
    scales = op.wscale.reshape(-1, op.J)
    m, s = np.zeros(scales.shape, np.int64), np.zeros(scales.shape, np.int64)
    for r in range(scales.shape[0]):
        o0 = r * op.b0
        for j in range(op.J):
            m[r, j], s[r, j] = quantize_multiplier(sx * float(scales[r, j]) / float(op.bias_scale[o0]))
    return m, s


def product(p, op, cols, o_lo, o_hi):
    """Output integers [N, o_hi - o_lo, P] of rows o_lo..o_hi-1 over cols [N, K, P] (x - zp_x)."""
    ty = p.tensors[op.output]
    rows = np.arange(o_lo, o_hi)
    W = op.weight[o_lo:o_hi]
    if not op.blockwise:
        zpw = op.wzp.reshape(-1)[rows // op.b0]
        acc = op.bias[rows][None, :, None] + np.matmul(W - zpw[:, None], cols)
        acc = int32(acc, op.name)
    else:
        zpw = op.wzp.reshape(-1, op.J)
        bm, bs = (None, None) if op.compact else (op.bm, op.bs)
        acc = np.broadcast_to(op.bias[rows][None, :, None], (cols.shape[0], len(rows), cols.shape[2])).copy()
        for j in range(op.J):
            ks = np.nonzero(op.jk == j)[0]
            Wj = W[:, ks] - zpw[rows // op.b0, j][:, None]
            P = int32(np.matmul(Wj, cols[:, ks, :]), op.name)
            r = rows // op.b0
            if op.compact:   # A_j = P_j · q_j: an exact integer product, no rounding
                acc = int32(acc + P * op.q[r, j][None, :, None], op.name)
            else:
                acc = int32(acc + mbqm(P, bm[r, j][None, :, None], bs[r, j][None, :, None]), op.name)
    return requant(acc, op.m[rows][None, :, None], op.s[rows][None, :, None], ty.zp, op.act_min, op.act_max)


def run_op(p, op, vals):
    x = vals[op.inputs[0]]
    tx, ty = p.tensors[op.inputs[0]], p.tensors[op.output]
    n = x.shape[0]
    if op.kind == "linear":
        return product(p, op, (x - tx.zp).T[None, :, :], 0, op.O)[0].T   # the samples as positions
    if op.kind == "conv2d":
        C, H, W = tx.shape
        OH, OW = ty.shape[1], ty.shape[2]
        xd = np.pad(x - tx.zp, ((0, 0), (0, 0), (op.ph, op.ph), (op.pw, op.pw)))   # padding: x - zp = 0
        G, O = op.groups, op.O
        out = np.empty((n, O, OH * OW), np.int64)
        for g in range(G):
            cols = columns(xd, op, g * C // G, (g + 1) * C // G, OH, OW)
            out[:, g * O // G:(g + 1) * O // G] = product(p, op, cols, g * O // G, (g + 1) * O // G)
        return out.reshape(n, O, OH, OW)
    if op.kind == "avgpool2d" and op.rounding == "divide":  # the input's quantization kept: Σ x / n
        C, H, W = tx.shape
        OH, OW = ty.shape[1], ty.shape[2]
        acc, cnt = np.zeros((n, C, OH, OW), np.int64), np.zeros((OH, OW), np.int64)
        for oy in range(OH):
            for ox in range(OW):
                y0, x0 = oy * op.sh - op.ph, ox * op.sw - op.pw
                y1, x1 = min(y0 + op.kh, H), min(x0 + op.kw, W)
                y0, x0 = max(y0, 0), max(x0, 0)
                acc[:, :, oy, ox] = x[:, :, y0:y1, x0:x1].sum(axis=(2, 3))
                cnt[oy, ox] = (y1 - y0) * (x1 - x0)
        return np.clip(divide(int32(acc, op.name), cnt), op.act_min, op.act_max)
    if op.kind == "global_avgpool" and op.rounding == "divide":
        acc = int32(x.reshape(n, tx.shape[0], -1).sum(axis=2), op.name)
        return np.clip(divide(acc, tx.shape[1] * tx.shape[2]), op.act_min, op.act_max)
    if op.kind in ("maxpool2d", "avgpool2d"):
        C, H, W = tx.shape
        OH, OW = ty.shape[1], ty.shape[2]
        pad = ((0, 0), (0, 0), (op.ph, op.ph), (op.pw, op.pw))
        if op.kind == "maxpool2d":
            xp, red = np.pad(x, pad, constant_values=-(1 << 40)), np.maximum   # padding never wins
        else:
            xp, red = np.pad(x - tx.zp, pad), np.add                            # padding is real 0
        acc = None
        for ky in range(op.kh):
            for kx in range(op.kw):
                t = xp[:, :, ky:ky + op.sh * (OH - 1) + 1:op.sh, kx:kx + op.sw * (OW - 1) + 1:op.sw]
                acc = t if acc is None else red(acc, t)
        if op.kind == "maxpool2d":
            return acc
        return requant(int32(acc, op.name), op.m[0], op.s[0], ty.zp, op.act_min, op.act_max)
    if op.kind == "global_avgpool":
        acc = int32((x - tx.zp).reshape(n, tx.shape[0], -1).sum(axis=2), op.name)
        return requant(acc, op.m[0], op.s[0], ty.zp, op.act_min, op.act_max)
    if op.kind == "add":
        ta, tb = tx, p.tensors[op.inputs[1]]
        a = int32((x - ta.zp) << op.left_shift, op.name)
        b = int32((vals[op.inputs[1]] - tb.zp) << op.left_shift, op.name)
        sa, sb = mbqm(a, op.m[0], op.s[0]), mbqm(b, op.m[1], op.s[1])
        return requant(int32(sa + sb, op.name), op.m[2], op.s[2], ty.zp, op.act_min, op.act_max)
    if op.kind == "mul":  # b of x's shape, or [C, 1, 1] (numpy broadcasts it over H, W)
        tb = p.tensors[op.inputs[1]]
        acc = int32((x - tx.zp) * (vals[op.inputs[1]] - tb.zp), op.name)
        return requant(acc, op.m[0], op.s[0], ty.zp, op.act_min, op.act_max)
    if op.kind == "concat":
        parts = [requant(vals[t] - p.tensors[t].zp, op.m[i], op.s[i], ty.zp, op.act_min, op.act_max)
                 for i, t in enumerate(op.inputs)]
        return np.concatenate(parts, axis=1)
    if op.kind == "lut":
        return op.table[x - tx.qmin]
    if op.kind == "flatten":
        return x.reshape(n, -1)
    if op.kind == "relu":
        return np.clip(x, op.act_min, op.act_max)
    raise Bad(f"unknown op kind {op.kind}")


def run(p, q):
    vals = {p.input: q}
    for op in p.ops:
        y = run_op(p, op, vals)
        want = (q.shape[0],) + p.tensors[op.output].shape
        if y.shape != want:
            raise Bad(f"op {op.name}: output {y.shape}, the tensor table says {want}")
        vals[op.output] = y
    return vals[p.output]


# ---- --verify: the writer's formulas, recomputed ----------------------------------------------

def verify(p):
    bad = []
    for op in p.ops:
        tx, ty = p.tensors[op.inputs[0]], p.tensors[op.output]
        sx, so = float(tx.scale), float(ty.scale)
        M = None
        if op.kind in ("linear", "conv2d"):
            if op.compact:
                M = None  # derived, not stored: nothing to recompute
            elif op.blockwise:
                M = [float(bs) / so for bs in op.bias_scale]
            else:
                sw = [float(op.wscale.reshape(-1)[o // op.b0]) for o in range(op.O)]
                M = [(sx * w) / so for w in sw]
                if any(F32(sx * w) != bs for w, bs in zip(sw, op.bias_scale)):
                    bad.append(f"{op.name}: bias_scale is not float32(s_x · s_w)")
        elif op.kind in ("avgpool2d", "global_avgpool") and op.rounding == "divide":
            if (tx.scale, tx.zp, tx.qmin, tx.qmax) != (ty.scale, ty.zp, ty.qmin, ty.qmax):
                bad.append(f"{op.name}: divides, but its output's quantization is not its input's")
        elif op.kind == "avgpool2d":
            M = [sx / ((so * op.kh) * op.kw)]
        elif op.kind == "global_avgpool":
            M = [sx / (so * (tx.shape[1] * tx.shape[2]))]
        elif op.kind == "add":
            sa, sb = sx, float(p.tensors[op.inputs[1]].scale)
            t = 2.0 * max(sa, sb)
            M = [sa / t, sb / t, t / (2.0 ** op.left_shift * so)]
        elif op.kind == "concat":
            M = [float(p.tensors[i].scale) / so for i in op.inputs]
        elif op.kind == "mul":
            M = [(sx * float(p.tensors[op.inputs[1]].scale)) / so]
        if M is not None:
            got = [(int(a), int(b)) for a, b in zip(op.m, op.s)]
            if got != [quantize_multiplier(v) for v in M]:
                bad.append(f"{op.name}: stored multipliers differ from the documented formula")
        lo, hi = ty.qmin, ty.qmax
        if op.act in ("relu", "relu6") or op.kind == "relu":
            lo = max(lo, ty.zp)
        if op.act == "relu6":
            six = np.rint(F32(6) * (F32(1) / ty.scale))
            hi = int(min(hi, ty.zp + six))
        if op.kind != "lut" and (op.act_min, op.act_max) != (lo, hi):
            bad.append(f"{op.name}: act_min/act_max {op.act_min}, {op.act_max}, the rule gives {lo}, {hi}")
        if op.kind == "lut" and op.function != "table":  # "table": the table is the function
            r = (np.arange(tx.qmin, tx.qmax + 1) - tx.zp).astype(F32) * tx.scale
            with np.errstate(over="ignore"):
                if op.function == "hardswish":
                    y = (r * np.clip(r + F32(3), F32(0), F32(6))) / F32(6)
                elif op.function == "sigmoid":
                    y = (1.0 / (np.exp(-r.astype(np.float64)) + 1.0)).astype(F32)
                else:
                    y = np.tanh(r.astype(np.float64)).astype(F32)
            v = y * (F32(1) / ty.scale)
            want = np.clip(np.rint(np.where(np.isnan(v), 0, v)), ty.qmin - ty.zp, ty.qmax - ty.zp) + ty.zp
            diff = np.abs(want.astype(np.int64) - op.table)
            if (op.function == "hardswish" and diff.any()) or diff.max() > 1:
                bad.append(f"{op.name}: {op.function} table: {int((diff > 0).sum())} entries differ")
    return bad


def check_form(p, path):
    want = np.fromfile(path, "<i4")
    at = 0
    for op in p.ops:
        if op.kind not in ("linear", "conv2d"):
            continue
        parts = [("bias", op.bias), ("bias_scale", op.bias_scale.astype("<f4").view("<i4")),
                 ("multiplier", op.m), ("shift", op.s)]
        if op.kind in ("linear", "conv2d") and op.compact:
            parts += [("sub-scales", op.q.reshape(-1))]
        elif op.blockwise:
            parts += [("block multipliers", op.bm.reshape(-1)), ("block shifts", op.bs.reshape(-1))]
        for what, v in parts:
            v = np.asarray(v).astype(np.int64).reshape(-1)
            w = want[at:at + v.size].astype(np.int64)
            if w.size != v.size or (w != v).any():
                raise Bad(f"{op.name}: the derived {what} are not the ones qat loaded")
            at += v.size
    if at != want.size:
        raise Bad("the form file holds more numbers than the program")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 4:
        sys.stderr.write(__doc__)
        return 2
    path, inp, n, outp = args[0], args[1], int(args[2]), args[3]
    try:
        p = Program(path)
        for a in argv:
            if a.startswith("--form="):
                check_form(p, a[len("--form="):])
        if "--verify" in argv:
            bad = verify(p)
            if bad:
                raise Bad("; ".join(bad))
        shape = p.tensors[p.input].shape
        if "--u8" in argv:
            q = quantize_bytes(p, np.fromfile(inp, np.uint8).reshape((n,) + shape))
        else:
            q = quantize_input(p, np.fromfile(inp, "<f4").reshape((n,) + shape))
        y = run(p, q).reshape(n, -1)
    except (Bad, KeyError, ValueError, OSError) as e:
        sys.stderr.write(f"{path}: {e}\n")
        return 1
    y.astype("<i4").tofile(outp)
    print(" ".join(str(int(c)) for c in y.argmax(axis=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
