#!/usr/bin/env python3
"""An autoencoder's test metrics from an engine's raw outputs, independent
of qat's own evaluation (bench_data_sets.sh checks `qat eval` with it):
  ae_auc.py MODEL.qat.h5 DATA OUTPUTS.npy
MODEL.qat.h5: the quantized file (docs/quantized-model-format.md): its
/normalization (mean, std, divisor) and the output tensor's scale and
zero point; DATA: the set (a .npy directory or an HDF5 file) whose test
split has x and anomaly; OUTPUTS.npy: `qat eval --outputs` of the first N
test samples: int32 output integers (int engine, dequantized here as
scale·(q - zero_point)) or float32 values (fake and hybrid engines).
The target is the model's normalized input, (x/divisor - mean)/std per
channel, in float32 (docs/quantization.md, "Normalization"), as the
trainer's; each sample's score is its mean squared error, and the ROC AUC
counts ties half (the Mann-Whitney statistic). Prints one JSON line:
n, mse, auc."""
import json
import os
import sys
import numpy as np
import h5py


def test_split(path):
    if os.path.isdir(path):
        return np.load(os.path.join(path, "test_x.npy")), np.load(os.path.join(path, "test_anomaly.npy"))
    with h5py.File(path, "r") as f:
        return f["test/x"][()], f["test/anomaly"][()]


def auc(scores, labels):
    """Mann-Whitney: P(score of a positive > score of a negative), ties half."""
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    r = np.empty(len(s))
    r[order] = ranks
    pos = labels == 1
    n1, n0 = pos.sum(), (~pos).sum()
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def main():
    model, data, outputs = sys.argv[1:4]
    with h5py.File(model, "r") as f:
        t = f[f"tensors/{int(f.attrs['output'][0])}"]
        scale, zp = float(np.asarray(t["scale"][()] if "scale" in t else t.attrs["scale"]).ravel()[0]), \
            int(np.asarray(t["zero_point"][()] if "zero_point" in t else t.attrs["zero_point"]).ravel()[0])
        if "normalization" in f:
            g = f["normalization"]
            mean, std = g["mean"][()].astype(np.float32), g["std"][()].astype(np.float32)
            div = np.float32(g.attrs["divisor"][0])
        else:
            mean, std, div = np.zeros(1, np.float32), np.ones(1, np.float32), np.float32(1)
    y = np.load(outputs)
    n = y.shape[0]
    x, anomaly = test_split(data)
    x = x[:n].reshape(n, -1).astype(np.float32)
    anomaly = anomaly[:n].astype(np.int64)
    if mean.size != 1:
        sys.exit("ae_auc: a normalization of several channels (this script knows one-channel vectors)")
    target = (x / div - mean[0]) / std[0]
    out = (y.astype(np.float64) - zp) * scale if y.dtype == np.int32 else y.astype(np.float64)
    err = ((out - target) ** 2).mean(axis=1)
    print(json.dumps({"n": int(n), "mse": round(float(err.mean()), 8), "auc": round(auc(err, anomaly), 6)}))


main()
