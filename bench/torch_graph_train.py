#!/usr/bin/env python3
"""PyTorch reference for the training benchmarks: the networks of qat's
model files (models/*.qnet, read by torch_graph_models' Graph, so the
architectures cannot drift apart), trained on one thread, Adam.

Two uses:

  torch_graph_train.py QNET DATA_DIR BATCH SAMPLES MODE
    (bench_graph_train.sh) real MNIST from its IDX files in DATA_DIR, the
    first SAMPLES of it, batch BATCH, Adam at 1e-3 constant; the first pass
    warms up, the second is timed. MODE "qat": eager-mode QAT as PyTorch's
    documentation does it (conv(+bn)(+relu) fused with fuse_modules_qat, as
    qat's matcher fuses them; the x86 backend's default QAT qconfig;
    prepare_qat); "float": the same network without quantization.

  torch_graph_train.py QNET --data SET --epochs N [options]
    (bench_kws.sh) a whole run as `qat train --qat` makes it, on a data set
    qat reads (a directory of .npy files, an HDF5 file or an IDX directory):
    the training split's per-channel mean and standard deviation as the
    input normalization (uint8 divided by 255 first: qat's --normalize
    auto), N epochs over the training split reshuffled each epoch, batch
    --batch (a last short batch too), Adam at --lr with qat's cosine
    schedule (per step, to 0 at the last), W8A8 eager QAT (fused as above;
    weights per-channel symmetric int8, activations asymmetric uint8 over
    the full 0..255, moving-average observers: the onednn qconfig, which
    is the x86 one without reduce_range), then convert to an int8 model
    on --engine (x86, fbgemm, onednn or qnnpack) and measure its accuracy
    on the test split. train_samples_per_s counts the training steps only
    (reading the batch included), as qat's does; evaluation is not timed.

Prints one JSON line: model, framework, train_samples_per_s, peak_rss_mib,
blas_core, and with --data: the fake-quantized and int8 test accuracies."""
import argparse
import json
import math
import os
import resource
import sys
import time
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.ao.quantization as tq
from torch_common import blas_core, load
from torch_graph_models import Graph

# torch.ao.quantization's deprecation notices (eager mode still works in
# the pinned version): noise in the benchmark's output
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*quantize_per_tensor, torch.quantize_per_channel.*")


def rss_now_mib():
    """This process's resident memory now (VmRSS), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def legacy(path, data, batch, samples, mode):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    m = Graph(path).train()
    x = to_model_input(load(f"{data}/train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)[:samples], m.input_shape)
    y = load(f"{data}/train-labels-idx1-ubyte.gz", 8)[:samples]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    y = torch.from_numpy(y.astype(np.int64))
    if mode == "qat":
        tq.fuse_modules_qat(m.layers, m.fuse, inplace=True)
        m.qconfig = tq.get_default_qat_qconfig("fbgemm")
        tq.prepare_qat(m, inplace=True)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def epoch():
        for s in range(0, samples - batch + 1, batch):
            opt.zero_grad()
            loss = loss_fn(m(x[s:s + batch]), y[s:s + batch])
            loss.backward()
            opt.step()

    epoch()  # warm-up
    t0 = time.perf_counter()
    epoch()
    dt = time.perf_counter() - t0
    print(json.dumps({"model": os.path.basename(path).split(".")[0],
                      "framework": "torch " + torch.__version__ + (" eager QAT" if mode == "qat" else ""),
                      "train_samples_per_s": round((samples // batch) * batch / dt, 1),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "blas_core": blas_core()}))


# ---- a data set as qat reads it -----------------------------------------------------------------
def read_split(path, split):
    """(x, y) of a split: numpy arrays as stored (y None when absent)."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, f"{split}_x.npy")):
            x = np.load(os.path.join(path, f"{split}_x.npy"))
            yp = os.path.join(path, f"{split}_y.npy")
            return x, (np.load(yp) if os.path.exists(yp) else None)
        stem = "train" if split == "train" else "t10k"
        for gz in (".gz", ""):
            ip = os.path.join(path, f"{stem}-images-idx3-ubyte{gz}")
            if os.path.exists(ip):
                lp = os.path.join(path, f"{stem}-labels-idx1-ubyte{gz}")
                if gz:
                    x, y = load(ip, 16), load(lp, 8)
                else:
                    x, y = np.fromfile(ip, np.uint8)[16:], np.fromfile(lp, np.uint8)[8:]
                return x.reshape(-1, 28, 28), y
        sys.exit(f"torch_graph_train: {path} holds no {split} split")
    import h5py
    with h5py.File(path, "r") as f:
        g = f[split]
        return g["x"][()], (g["y"][()] if "y" in g else None)


def to_model_input(x, shape):
    """Stored samples as the model's [N, *shape] (a [H, W] sample for a
    [1, H, W] input)."""
    return x.reshape((x.shape[0],) + tuple(shape))


def cosine(base, step, total):
    t = min(step, total)
    return base * (1.0 + math.cos(math.pi * t / total)) / 2.0


def qat_run(a):
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    rss_import = rss_now_mib()  # torch and its libraries, before any data
    t_load = time.perf_counter()
    xtr, ytr = read_split(a.data, "train")
    xte, yte = read_split(a.data, "test")
    if a.limit_train:
        xtr, ytr = xtr[:a.limit_train], ytr[:a.limit_train]
    if a.limit_test:
        xte, yte = xte[:a.limit_test], yte[:a.limit_test]
    m = Graph(a.qnet)
    shape = m.input_shape
    if a.channels_last:  # [N, H, W, C] stored: the model takes [N, C, H, W], as qat --channels-last reads it
        xtr, xte = xtr.transpose(0, 3, 1, 2), xte.transpose(0, 3, 1, 2)
    div = 255.0 if xtr.dtype == np.uint8 else 1.0
    xtr = to_model_input(xtr, shape).astype(np.float64) / div
    xte = to_model_input(xte, shape).astype(np.float64) / div
    # qat's --normalize auto: per channel (axis 0 of a [C, H, W] sample;
    # the whole sample otherwise), population standard deviation
    axes = (0, 2, 3) if len(shape) == 3 else None
    mean = xtr.mean(axis=axes, keepdims=True)
    std = xtr.std(axis=axes, keepdims=True)
    xtr = torch.from_numpy(((xtr - mean) / std).astype(np.float32))
    xte = torch.from_numpy(((xte - mean) / std).astype(np.float32))
    ytr, yte = torch.from_numpy(ytr.astype(np.int64)), torch.from_numpy(yte.astype(np.int64))
    load_s = time.perf_counter() - t_load
    if a.engine not in torch.backends.quantized.supported_engines:
        sys.exit(f"torch_graph_train: engine {a.engine} is not in this torch ({torch.backends.quantized.supported_engines})")
    torch.backends.quantized.engine = a.engine
    m.train()
    if not a.float:
        tq.fuse_modules_qat(m.layers, m.fuse, inplace=True)
        # W8A8 as qat trains it: per-channel symmetric int8 weights, uint8
        # activations over 0..255 (onednn's qconfig: x86's without reduce_range)
        m.qconfig = tq.get_default_qat_qconfig("onednn" if a.engine != "qnnpack" else "qnnpack")
        tq.prepare_qat(m, inplace=True)
    opt = torch.optim.Adam(m.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    n = xtr.shape[0]
    steps_per_epoch = (n + a.batch - 1) // a.batch
    total = steps_per_epoch * a.epochs
    step, train_s, loss = 0, 0.0, float("nan")
    for _ in range(a.epochs):
        perm = torch.from_numpy(rng.permutation(n))
        t0 = time.perf_counter()
        for s in range(0, n, a.batch):
            idx = perm[s:s + a.batch]
            xb, yb = xtr[idx], ytr[idx]
            for g in opt.param_groups:
                g["lr"] = cosine(a.lr, step, total)
            opt.zero_grad()
            out = loss_fn(m(xb), yb)
            out.backward()
            opt.step()
            step += 1
        train_s += time.perf_counter() - t0
        loss = out.item()

    def accuracy(model):
        model.eval()
        right = 0
        with torch.no_grad():
            for s in range(0, xte.shape[0], 256):
                right += (model(xte[s:s + 256]).argmax(1) == yte[s:s + 256]).sum().item()
        return right / xte.shape[0]

    acc_fake = accuracy(m)
    acc_int8 = None
    if not a.float:
        m.eval()
        tq.convert(m, inplace=True)
        acc_int8 = accuracy(m)
    print(json.dumps({"model": os.path.basename(a.qnet).split(".")[0],
                      "framework": f"torch {torch.__version__} " + ("float" if a.float else f"eager QAT, {a.engine} int8"),
                      "epochs": a.epochs, "batch": a.batch, "lr": a.lr, "train_samples": n,
                      "train_samples_per_s": round(n * a.epochs / train_s, 1),
                      "train_seconds": round(train_s, 3), "load_seconds": round(load_s, 3),
                      "last_loss": round(loss, 6),
                      "test_samples": int(xte.shape[0]),
                      ("test_accuracy" if a.float else "test_accuracy_fake_quant"): round(acc_fake, 6),
                      "test_accuracy_int8": None if acc_int8 is None else round(acc_int8, 6),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "rss_after_import_mib": round(rss_import, 1),
                      "blas_core": blas_core(), "torch": torch.__version__, "threads": torch.get_num_threads()}))


def main():
    if len(sys.argv) == 6 and not sys.argv[2].startswith("--"):
        legacy(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    ap = argparse.ArgumentParser(description="W8A8 eager QAT of a .qnet model on a data set, then int8")
    ap.add_argument("qnet")
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit-train", type=int, default=0)
    ap.add_argument("--limit-test", type=int, default=0)
    ap.add_argument("--engine", default="x86", help="the int8 backend: x86, fbgemm, onednn or qnnpack")
    ap.add_argument("--float", action="store_true", help="train without quantization (no int8 model)")
    ap.add_argument("--channels-last", action="store_true", help="x is [N, H, W, C] (as qat's --channels-last)")
    qat_run(ap.parse_args())


main()
