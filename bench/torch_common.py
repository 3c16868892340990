"""Shared by the PyTorch reference scripts of the benchmarks: the real
MNIST files, and the QuantStub/DeQuantStub wrapper eager-mode quantization
needs."""
import ctypes
import gzip
import warnings
import numpy as np
import torch.nn as nn
import torch.ao.quantization as tq

# observer.py's reduce_range deprecation notice, printed by the default
# QAT qconfig itself: noise in the benchmark's output
warnings.filterwarnings("ignore", message="Please use quant_min and quant_max")

def blas_core():
    """The kernel family the process's OpenBLAS chose (the library torch
    loaded: same file, same environment, so the same choice as qat's)."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown"

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
