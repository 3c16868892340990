#!/usr/bin/env python3
"""PyTorch reference for bench_mnist_infer.sh: int8 inference of the same
MLP / LeNet-5, converted by eager-mode post-training quantization (fused
Linear/Conv+ReLU, default qconfig of the backend, calibrated on 1 000
training images), batch 64, one thread, on the real MNIST test set; the
best of three timed passes.
Usage: torch_mnist_infer.py DATA_DIR BATCH SAMPLES MODELS BACKENDS
Prints one JSON line per (model, backend): {"model", "backend",
"infer_samples_per_s"}. The weights are untrained: speed does not depend
on them."""
import json, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.ao.quantization as tq
from torch_common import Wrap, load

def model(name):
    if name == "mlp":
        body = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
        fuse = [["1", "2"], ["3", "4"]]
    else:
        body = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        fuse = [["0", "1"], ["3", "4"], ["7", "8"], ["9", "10"]]
    body.eval()
    tq.fuse_modules(body, fuse, inplace=True)
    return Wrap(body).eval()

def main():
    data, batch, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    def images(name, n):
        x = load(f"{data}/{name}", 16).reshape(-1, 1, 28, 28)[:n]
        return (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    calib, test = images("train-images-idx3-ubyte.gz", 1000), images("t10k-images-idx3-ubyte.gz", samples)
    for backend in sys.argv[5].split(","):
        if backend not in torch.backends.quantized.supported_engines:
            print(json.dumps({"backend": backend, "error": "not supported by this torch build"}))
            continue
        torch.backends.quantized.engine = backend
        for name in sys.argv[4].split(","):
            m = model(name)
            m.qconfig = tq.get_default_qconfig(backend)
            tq.prepare(m, inplace=True)
            with torch.no_grad():
                m(calib)
            tq.convert(m, inplace=True)
            def run():
                with torch.no_grad():
                    for s in range(0, samples - batch + 1, batch):
                        m(test[s:s + batch])
            run()  # warm-up
            dt = 1e30
            for _ in range(3):  # the best of three passes, as bench_infer
                t0 = time.perf_counter()
                run()
                dt = min(dt, time.perf_counter() - t0)
            print(json.dumps({"model": name, "backend": backend, "framework": "torch " + torch.__version__,
                              "infer_samples_per_s": round((samples // batch) * batch / dt, 1)}))

main()
