#!/usr/bin/env python3
"""PyTorch reference for bench_mnist_train.sh: training of the same MLP /
LeNet-5 at the same batch size, one thread, on real MNIST, Adam. With a 5th
argument "qat", eager-mode QAT: prepare_qat with the default QAT qconfig.
Prints one JSON line per model: {"model", "train_samples_per_s", ...}."""
import json, resource, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.ao.quantization as tq
from torch_common import Wrap, blas_core, load

def models():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    lenet = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    return {"mlp": mlp, "lenet": lenet}

def main():
    data, batch, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    wanted = sys.argv[4].split(",")
    qat = len(sys.argv) > 5 and sys.argv[5] == "qat"
    torch.set_num_threads(1)
    torch.manual_seed(1)
    x = load(f"{data}/train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:samples]
    y = load(f"{data}/train-labels-idx1-ubyte.gz", 8)[:samples]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    y = torch.from_numpy(y.astype(np.int64))
    for name, model in models().items():
        if name not in wanted:
            continue
        if qat:
            model = Wrap(model).train()
            model.qconfig = tq.get_default_qat_qconfig("fbgemm")
            tq.prepare_qat(model, inplace=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        def epoch():
            for s in range(0, samples - batch + 1, batch):
                opt.zero_grad()
                loss = loss_fn(model(x[s:s + batch]), y[s:s + batch])
                loss.backward()
                opt.step()
        epoch()  # warm-up
        t0 = time.perf_counter()
        epoch()
        dt = time.perf_counter() - t0
        print(json.dumps({"model": name, "framework": "torch " + torch.__version__ + (" eager QAT" if qat else ""),
                          "train_samples_per_s": round((samples // batch) * batch / dt, 1),
                          "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                          "blas_core": blas_core()}))

main()
