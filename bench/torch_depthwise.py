"""PyTorch 1.13's depthwise 3x3 convolution (conv2d with groups = C,
stride 1, padding 1, bias), measured as bench_depthwise measures qat's:
one thread, batch 64, the input an activation (x.requires_grad, as for any
layer but the first), dy given; forward alone and forward + backward, best
of ITERS. Prints one line of JSON. Usage: python3 bench/torch_depthwise.py [ITERS]"""
import json
import sys
import time
import torch
import torch.nn.functional as F
from torch_common import blas_core

torch.set_num_threads(1)
torch.manual_seed(1)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 30
out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "blas_core": blas_core()}
for n, c, h, w in ((64, 64, 14, 14), (64, 128, 7, 7)):
    x = torch.randn(n, c, h, w)
    wt = (0.3 * torch.randn(c, 1, 3, 3)).requires_grad_()
    b = torch.zeros(c).requires_grad_()
    dy = torch.randn(n, c, h, w)
    t_fwd = t_both = 1e30
    for _ in range(iters):
        a = x.clone().requires_grad_()  # an activation: its gradient is computed
        t0 = time.perf_counter()
        y = F.conv2d(a, wt, b, stride=1, padding=1, groups=c)
        t1 = time.perf_counter()
        y.backward(dy)
        t2 = time.perf_counter()
        t_fwd, t_both = min(t_fwd, t1 - t0), min(t_both, t2 - t0)
    key = "%dx%dx%dx%d" % (n, c, h, w)
    out[key + "_forward"] = n / t_fwd
    out[key + "_fwd_bwd"] = n / t_both
print(json.dumps(out))
