"""Shared by the PyTorch reference scripts of the benchmarks: the real
MNIST files, and the QuantStub/DeQuantStub wrapper eager-mode quantization
needs."""
import gzip
import numpy as np
import torch.nn as nn
import torch.ao.quantization as tq

class Wrap(nn.Module):
    """QuantStub -> model -> DeQuantStub, as eager-mode quantization requires."""
    def __init__(self, body):
        super().__init__()
        self.quant, self.body, self.dequant = tq.QuantStub(), body, tq.DeQuantStub()
    def forward(self, x):
        return self.dequant(self.body(self.quant(x)))

def load(path, offset):
    """The bytes of a gzipped IDX file after its header (offset bytes)."""
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)
