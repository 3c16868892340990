#!/usr/bin/env python3
"""PyTorch 1.13 reference for bench_graph_infer.sh: the same networks as
qat's model files (models/*.qnet, read here, so the architectures cannot
drift apart), as eager-mode quantized int8 models: QuantStub/DeQuantStub
around the graph, FloatFunctional for the residual adds (add_relu where a
ReLU follows, as qat fuses it), conv(+bn)(+relu) and linear(+relu) fused,
prepare_qat, a few training steps so the observers see data, convert.
Each backend (qnnpack, onednn) then runs batch BATCH inference, one
thread (torch.set_num_threads(1)), the best of PASSES timed passes over
SAMPLES inputs. The weights are untrained: speed does not depend on them.
Usage: torch_graph_models.py QNET[,QNET...] BATCH SAMPLES BACKENDS [PASSES]
Prints one JSON line per (model, backend)."""
import json
import os
import sys
import time
import torch
import torch.nn as nn
import torch.ao.quantization as tq
import torch.nn.quantized as nnq
from torch_common import blas_core  # also silences the observers' deprecation notice


def pair(v):
    a, _, b = v.partition("x")
    return (int(a), int(b or a))


class Graph(nn.Module):
    """A .qnet file's layers run in file order; each layer's output is kept
    by name for the layers that read it (residual adds)."""

    def __init__(self, path):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.layers = nn.ModuleDict()
        self.order = []      # (name, kind, inputs)
        self.fuse = []       # module name lists for fuse_modules_qat
        shapes = {}
        kinds = {}
        consumers = {}
        lines = []
        with open(path) as f:
            for raw in f:
                line = raw.split("#", 1)[0].split()
                if line:
                    lines.append(line)
        for line in lines:
            if line[0] != "input":
                for i in line[2].split(","):
                    consumers[i] = consumers.get(i, 0) + 1
        for line in lines:
            if line[0] == "input":
                shape = tuple(int(s) for s in dict(kv.split("=") for kv in line[1:])["shape"].split(","))
                shapes["input"] = shape
                self.input_shape = shape
                continue
            if line[0] == "output":
                continue
            kind, name, inputs = line[0], line[1], line[2].split(",")
            keys = dict(kv.split("=") for kv in line[3:])
            x = shapes[inputs[0]]
            if kind == "conv2d":
                kh, kw = pair(keys["kernel"])
                sh, sw = pair(keys.get("stride", "1"))
                ph, pw = pair(keys.get("pad", "0"))
                out = int(keys["out"])
                g = keys.get("groups", "1")
                groups = x[0] if g == "depthwise" else int(g)
                m = nn.Conv2d(x[0], out, (kh, kw), (sh, sw), (ph, pw), groups=groups,
                              bias=keys.get("bias", "true") == "true")
                shapes[name] = (out, (x[1] + 2 * ph - kh) // sh + 1, (x[2] + 2 * pw - kw) // sw + 1)
            elif kind == "linear":
                out = int(keys["out"])
                m = nn.Linear(x[0], out, bias=keys.get("bias", "true") == "true")
                shapes[name] = (out,)
            elif kind == "batchnorm":
                m = nn.BatchNorm2d(x[0]) if len(x) == 3 else nn.BatchNorm1d(x[0])
                shapes[name] = x
            elif kind in ("relu", "relu6"):
                m = nn.ReLU() if kind == "relu" else nn.ReLU6()
                shapes[name] = x
            elif kind == "maxpool2d" or kind == "avgpool2d":
                k = pair(keys["kernel"])
                s = pair(keys.get("stride", keys["kernel"]))
                p = pair(keys.get("pad", "0"))
                m = (nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(k, s, p)
                shapes[name] = (x[0], (x[1] + 2 * p[0] - k[0]) // s[0] + 1, (x[2] + 2 * p[1] - k[1]) // s[1] + 1)
            elif kind == "global_avgpool":
                m = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
                shapes[name] = (x[0],)
            elif kind == "flatten":
                m = nn.Flatten()
                shapes[name] = (x[0] * x[1] * x[2],) if len(x) == 3 else x
            elif kind == "add":
                m = nnq.FloatFunctional()
                shapes[name] = x
            elif kind == "dropout":  # identity in eval mode and after convert, as in qat
                m = nn.Dropout(float(keys.get("p", "0.5")))
                shapes[name] = x
            else:
                raise SystemExit(f"{path}: {kind} is not in this benchmark's reader")
            kinds[name] = kind
            self.layers[name] = m
            self.order.append((name, kind, inputs))
        # fusion groups, as qat's matcher: conv/linear -> batchnorm -> relu,
        # each link only when the layer before feeds nothing else; add -> relu
        fused_relu = set()
        for name, kind, inputs in self.order:
            if kind in ("conv2d", "linear"):
                group = [name]
                cur = name
                for nxt in ("batchnorm", "relu"):
                    follow = [n for n, k, i in self.order if i == [cur] and k == nxt]
                    if follow and consumers.get(cur, 0) == 1:
                        group.append(follow[0])
                        cur = follow[0]
                if len(group) > 1:
                    self.fuse.append(group)
            if kind == "add":
                follow = [n for n, k, i in self.order if i == [name] and k == "relu"]
                if follow and consumers.get(name, 0) == 1:
                    fused_relu.add(name)
                    self.layers[follow[0]] = nn.Identity()
        self.add_relu = fused_relu

    def forward(self, x):
        vals = {"input": self.quant(x)}
        last = None
        for name, kind, inputs in self.order:
            m = self.layers[name]
            if kind == "add":
                a, b = vals[inputs[0]], vals[inputs[1]]
                y = m.add_relu(a, b) if name in self.add_relu else m.add(a, b)
            else:
                y = m(vals[inputs[0]])
            vals[name] = y
            last = y
        return self.dequant(last)


def main():
    paths, batch, samples = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
    backends = sys.argv[4].split(",")
    passes = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    torch.set_num_threads(1)
    torch.manual_seed(1)
    for backend in backends:
        if backend not in torch.backends.quantized.supported_engines:
            print(json.dumps({"backend": backend, "error": "not supported by this torch build"}))
            continue
        torch.backends.quantized.engine = backend
        for path in paths:
            m = Graph(path)
            x = torch.randn((samples,) + m.input_shape)
            m.train()
            tq.fuse_modules_qat(m.layers, m.fuse, inplace=True)
            m.qconfig = tq.get_default_qat_qconfig(backend)
            tq.prepare_qat(m, inplace=True)
            opt = torch.optim.Adam(m.parameters(), 1e-3)
            for s in range(0, 4 * batch, batch):  # the observers and BN statistics see data
                loss = m(x[s:s + batch]).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            m.eval()
            tq.convert(m, inplace=True)

            def run():
                with torch.no_grad():
                    for s in range(0, samples - batch + 1, batch):
                        m(x[s:s + batch])
            run()  # warm-up
            dt = dc = 1e30
            for _ in range(passes):
                t0, c0 = time.perf_counter(), time.thread_time()
                run()
                dt, dc = min(dt, time.perf_counter() - t0), min(dc, time.thread_time() - c0)
            # thread CPU time too: one thread (torch.set_num_threads(1)) does the work in this one
            n = (samples // batch) * batch
            print(json.dumps({"model": os.path.basename(path).split(".")[0], "backend": backend,
                              "framework": "torch " + torch.__version__, "blas_core": blas_core(),
                              "infer_samples_per_s": round(n / dt, 1), "cpu_samples_per_s": round(n / dc, 1)}))


if __name__ == "__main__":  # torch_graph_train.py imports Graph
    main()
