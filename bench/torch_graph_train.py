#!/usr/bin/env python3
"""PyTorch 1.13 reference for bench_graph_train.sh: training of the
networks of qat's model files (models/*.qnet, read by torch_graph_models'
Graph, so the architectures cannot drift apart) on real MNIST, batch BATCH,
one thread, Adam at 1e-3. With MODE "qat": eager-mode QAT as PyTorch's
documentation does it: conv(+bn)(+relu) fused (fuse_modules_qat, as qat's
matcher fuses them), the default QAT qconfig of the x86 backend, and
prepare_qat. MODE "float": the same network without quantization.
The first pass over the SAMPLES warms up; the second is timed.
Usage: torch_graph_train.py QNET DATA_DIR BATCH SAMPLES MODE
Prints one JSON line: model, train_samples_per_s, peak_rss_mib, ..."""
import json
import os
import resource
import sys
import time
import numpy as np
import torch
import torch.nn as nn
import torch.ao.quantization as tq
from torch_common import blas_core, load
from torch_graph_models import Graph


def main():
    path, data, batch, samples, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    torch.set_num_threads(1)
    torch.manual_seed(1)
    x = load(f"{data}/train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:samples]
    y = load(f"{data}/train-labels-idx1-ubyte.gz", 8)[:samples]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    y = torch.from_numpy(y.astype(np.int64))
    m = Graph(path).train()
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


main()
