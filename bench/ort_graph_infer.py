"""onnxruntime's int8 inference of a qat ONNX export, for bench_graph_infer.sh.

The export is QDQ; with every graph optimization on, onnxruntime fuses
DequantizeLinear -> op -> QuantizeLinear groups into its integer ops
(QLinearConv, QGemm, ...) and runs MLAS's int8 kernels on them; with its
default options some groups stay float (6 of ResNet-8's 9 convolutions:
docs/onnx.md), which the printed operators show. One thread, no spinning, the default fusion options; batch B of random pixels in [0, 1) (speed does not
depend on the values); each pass runs SAMPLES inputs, the best of PASSES
is kept. Prints one JSON line: samples/s in wall time and in this thread's
CPU time, and the operators of the optimized graph, which say whether the
int8 kernels ran (QLinear* against float Conv/MatMul/Gemm).

    ort_graph_infer.py MODEL.onnx BATCH SAMPLES PASSES
"""
import collections
import json
import os
import re
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

# the operators worth counting in the optimized graph
OPS = {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearGlobalAveragePool", "QLinearAveragePool",
       "QLinearConcat", "QLinearSigmoid", "QLinearLeakyRelu", "MatMulInteger", "ConvInteger", "Conv", "MatMul",
       "Gemm", "Add", "QuantizeLinear", "DequantizeLinear", "MaxPool", "GlobalAveragePool"}


def graph_ops(path):
    """Counts of the operators in a serialized ONNX model, read without the
    onnx package: a NodeProto's op_type is field 4, a length-delimited
    string (key byte 0x22), so every known name after such a key counts."""
    data = open(path, "rb").read()
    counts = collections.Counter()
    for m in re.finditer(rb"\x22([\x01-\x30])", data):
        n = m.group(1)[0]
        name = data[m.end():m.end() + n]
        if name.isascii() and name.decode() in OPS:
            counts[name.decode()] += 1
    return dict(sorted(counts.items()))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    model, batch, samples, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # session.qdqisint8allowed is left at its default: with it onnxruntime fuses every convolution
    # but runs its int8-activation kernels, 5-9x slower here (docs/onnx.md)
    so.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        ops = graph_ops(so.optimized_model_filepath)
    inp = sess.get_inputs()[0]
    shape = [batch] + [int(d) for d in inp.shape[1:]]
    x = np.random.default_rng(1).random(shape, dtype=np.float32)
    runs = max(1, samples // batch)
    sess.run(None, {inp.name: x})  # the first run allocates
    best_wall = best_cpu = float("inf")
    for _ in range(passes):
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(runs):
            sess.run(None, {inp.name: x})
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.thread_time() - c0)
    n = runs * batch
    print(json.dumps({"backend": "ort", "onnxruntime": ort.__version__, "infer_samples_per_s": n / best_wall,
                      "cpu_samples_per_s": n / best_cpu, "ops": ops}))


if __name__ == "__main__":
    main()
