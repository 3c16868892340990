"""PyTorch 1.13's fake quantization over 4 M floats, one thread, measured as
bench_fake_quant measures qat's: forward alone; forward + backward with dy
given, for an activation (x is another op's output, no .grad kept) and for
a weight (a leaf whose .grad accumulates). Best of 10. Prints one line of
JSON. Usage: python3 bench/torch_fake_quant.py"""
import json
import time
import torch

torch.set_num_threads(1)
torch.manual_seed(1)
x0 = 4 * torch.randn(256, 16384)
dy = torch.ones_like(x0)

def qparams(per_channel):
    if per_channel:  # symmetric narrow int8 per row, as bench_fake_quant's per-channel type
        amax = x0.abs().amax(dim=1).clamp(min=1e-12)
        return amax / 127.0, torch.zeros(256, dtype=torch.int32)
    lo, hi = min(x0.min().item(), 0.0), max(x0.max().item(), 0.0)
    s = (hi - lo) / 255.0
    return s, int(max(-128, min(127, -128 - round(lo / s))))

def fq(x, per_channel, s, zp):
    if per_channel:
        return torch.fake_quantize_per_channel_affine(x, s, zp, 0, -127, 127)
    return torch.fake_quantize_per_tensor_affine(x, s, zp, -128, 127)

def best(fn, n=10):
    t = 1e30
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return x0.numel() / t / 1e9

out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
for name, pc in (("per_tensor", False), ("per_channel", True)):
    s, zp = qparams(pc)
    with torch.no_grad():
        out[name + "_forward"] = best(lambda: fq(x0, pc, s, zp))
    leaf = x0.clone().requires_grad_(True)
    def weight():
        fq(leaf, pc, s, zp).backward(dy)
    out[name + "_fwd_bwd_weight"] = best(weight)
    src = x0.clone().requires_grad_(True)
    def activation():
        a = src * 1.0  # another op's output (its cost is not timed below)
        t0 = time.perf_counter()
        y = fq(a, pc, s, zp)
        torch.autograd.grad(y, a, dy)
        return time.perf_counter() - t0
    out[name + "_fwd_bwd_activation"] = x0.numel() / min(activation() for _ in range(10)) / 1e9
print(json.dumps(out))
