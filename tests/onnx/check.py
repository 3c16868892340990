#!/usr/bin/python3
"""Checks ONNX files with the checker of Debian's python3-onnx and prints,
for each, one JSON line: the check's result, the op types of the graph,
and (with --optimized FILE) the op types onnxruntime ran after its
QDQ fusion, sorted into integer kernels and float ones.

    /usr/bin/python3 tests/onnx/check.py MODEL.onnx [--optimized OPT.onnx]

Exit status 1 when a file fails the checker (its message on stderr)."""
import collections
import json
import sys

import onnx

# Kernels that compute on integers: onnxruntime's contrib QLinear* /
# QGemm / NhwcMaxPool, and the standard ops it runs on int8 tensors.
INTEGER = {"QLinearConv", "QGemm", "QLinearMatMul", "QLinearAdd", "QLinearConcat", "QLinearAveragePool",
           "QLinearGlobalAveragePool", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearMul", "NhwcMaxPool",
           "MatMulInteger", "ConvInteger", "QLinearSoftmax"}


def int8_inputs(model):
    """Names of the values that hold integers (so a MaxPool/Flatten/Reshape
    reading one runs on integers)."""
    types = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    for t in model.graph.initializer:
        types[t.name] = t.data_type
    for n in model.graph.node:  # QuantizeLinear / integer kernels produce integers
        if n.op_type == "QuantizeLinear" or n.op_type in INTEGER:
            for o in n.output:
                types.setdefault(o, onnx.TensorProto.INT8)
    return {k for k, v in types.items() if v in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)}


def kernels(path):
    m = onnx.load(path)
    ints = int8_inputs(m)
    changed = True
    while changed:  # shape ops keep their input's type
        changed = False
        for n in m.graph.node:
            if n.op_type in ("Transpose", "Reshape", "Flatten", "MaxPool", "Squeeze", "Unsqueeze", "Clip", "Relu") \
                    and n.input and n.input[0] in ints and n.output[0] not in ints:
                ints.add(n.output[0])
                changed = True
    integer, floating = collections.Counter(), collections.Counter()
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        on_ints = n.op_type in INTEGER or (n.input and n.input[0] in ints)
        (integer if on_ints else floating)[n.op_type] += 1
    return dict(integer), dict(floating)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rc, i = 0, 1
    while i < len(argv):
        path, out = argv[i], {"file": argv[i]}
        i += 1
        try:
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            out["checker"] = "ok"
        except Exception as e:  # the checker's own exception types vary between versions
            out["checker"] = "failed"
            print(f"{path}: {e}", file=sys.stderr)
            rc = 1
            print(json.dumps(out))
            continue
        out["opset"] = [(o.domain, o.version) for o in model.opset_import]
        out["ops"] = dict(collections.Counter(n.op_type for n in model.graph.node))
        if i + 1 < len(argv) + 1 and i < len(argv) and argv[i] == "--optimized":
            out["integer_kernels"], out["float_kernels"] = kernels(argv[i + 1])
            i += 2
        print(json.dumps(out, sort_keys=True))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
