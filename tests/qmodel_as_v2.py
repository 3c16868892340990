#!/usr/bin/env python3
"""Rewrites a qat quantized model file of version 3 or 4 as version 2, as
docs/quantized-model-format.md ("Older versions") describes version 2, so
that the tests can check how a version-2 file with sub-channel weights is
run (the loader gives such ops an integer form of its own).

  qmodel_as_v2.py IN.qat.h5 OUT.qat.h5

Each weight must be typed on its own shape (quantized_shape = shape, the
blocks dividing it): version 2 knew no other. Exit status 1 otherwise."""
import shutil
import sys

import h5py
import numpy as np


def unpack(data, n, b, signed):
    per = 8 // b
    i = np.arange(n)
    f = (data[i // per].astype(np.int64) >> ((i % per) * b)) & ((1 << b) - 1)
    return np.where(f >= 1 << (b - 1), f - (1 << b), f) if signed else f


def main(src, dst):
    shutil.copyfile(src, dst)
    f = h5py.File(dst, "r+")
    f.attrs["version"] = np.array([2], np.int64)
    if "normalization" in f:
        del f["normalization"]
    for name in f["ops"]:
        g = f["ops"][name]
        if "weight" not in g:
            continue
        ds = g["weight"]
        attrs = dict(ds.attrs)
        shape = [int(v) for v in attrs.pop("shape")]
        qshape = [int(v) for v in attrs.pop("quantized_shape")]
        if qshape != shape:
            sys.exit(f"op {name}: typed on {qshape}, not on the weight's shape {shape}")
        block = [int(v) for v in attrs["block_sizes"]]
        if any(d % b for d, b in zip(shape, block)):
            sys.exit(f"op {name}: blocks {block} do not divide {shape}")
        signed = bytes(attrs["storage_type"]).decode()[0] == "i"
        bits = int(attrs["bits"][0])
        if "packed_bits" in attrs:
            w = unpack(ds[...], int(np.prod(shape)), int(attrs.pop("packed_bits")[0]), signed)
        else:
            w = ds[...].reshape(-1).astype(np.int64)
        dtype = (np.int8 if signed else np.uint8) if bits <= 8 else (np.int16 if signed else np.uint16)
        del g["weight"]
        nd = g.create_dataset("weight", data=w.reshape(shape).astype(dtype))
        for k, v in attrs.items():
            nd.attrs[k] = v
        mlir = bytes(g["weight_mlir"][...]).decode()
        del g["weight_mlir"]
        g["weight_mlir"] = np.bytes_(mlir)
        # blockwise (neither per-tensor nor per channel): no integer form in version 2
        whole = all(b == d for b, d in zip(block[1:], shape[1:]))
        if whole and block[0] in (1, shape[0]):
            continue
        sx = np.float32(f["tensors"][str(int(g.attrs["inputs"][0]))].attrs["scale"][0])
        scale = g["weight_scale"][...].reshape(-1)
        J = scale.size // g["weight_scale"].shape[0]
        bias, bs = g["bias"][...], g["bias_scale"][...]
        O = shape[0]
        first = np.array([scale[o // block[0] * J] for o in range(O)])       # the scale of element (o, 0, ...)
        new_bs = np.array([np.float32(float(sx) * float(s)) for s in first], np.float32)
        new_bias = np.array([np.rint(float(bias[o]) * float(bs[o]) / float(new_bs[o])) for o in range(O)], np.int32)
        g["bias"][...] = new_bias
        g["bias_scale"][...] = new_bs
        del g["multiplier"], g["shift"]
    f.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
