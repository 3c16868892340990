// The TFLite graph of src/tflite/internal.h as flatbuffer bytes, built
// with the builder flatc generates from src/tflite/schema.fbs and checked
// with its verifier. The one C++ file of the library: flatbuffers' C++
// builder is the well-kept writer of the format, and this file only maps
// the plain C graph onto it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "schema_generated.h"
#include "internal.h"

namespace {

void say(char *msg, size_t len, const char *text) {
    if (msg && len) std::snprintf(msg, len, "%s", text);
}

// RESHAPE has none: its shape is its second input, a constant tensor.
flatbuffers::Offset<void> options(flatbuffers::FlatBufferBuilder &b, const qat__tfl_op &op,
                                  tflite::BuiltinOptions *type) {
    auto pad = static_cast<tflite::Padding>(op.padding);
    auto act = static_cast<tflite::ActivationFunctionType>(op.act);
    switch (op.code) {
    case QAT__TFL_CONV_2D:
        *type = tflite::BuiltinOptions_Conv2DOptions;
        return tflite::CreateConv2DOptions(b, pad, op.stride_w, op.stride_h, act).Union();
    case QAT__TFL_DEPTHWISE_CONV_2D:
        *type = tflite::BuiltinOptions_DepthwiseConv2DOptions;
        return tflite::CreateDepthwiseConv2DOptions(b, pad, op.stride_w, op.stride_h, op.depth_multiplier, act).Union();
    case QAT__TFL_AVERAGE_POOL_2D:
    case QAT__TFL_MAX_POOL_2D:
        *type = tflite::BuiltinOptions_Pool2DOptions;
        return tflite::CreatePool2DOptions(b, pad, op.stride_w, op.stride_h, op.filter_w, op.filter_h, act).Union();
    case QAT__TFL_FULLY_CONNECTED:
        *type = tflite::BuiltinOptions_FullyConnectedOptions;
        return tflite::CreateFullyConnectedOptions(b, act).Union();
    case QAT__TFL_CONCATENATION:
        *type = tflite::BuiltinOptions_ConcatenationOptions;
        return tflite::CreateConcatenationOptions(b, op.axis, act).Union();
    case QAT__TFL_ADD:
        *type = tflite::BuiltinOptions_AddOptions;
        return tflite::CreateAddOptions(b, act).Union();
    case QAT__TFL_MUL:
        *type = tflite::BuiltinOptions_MulOptions;
        return tflite::CreateMulOptions(b, act).Union();
    case QAT__TFL_PAD:
        *type = tflite::BuiltinOptions_PadOptions;
        return tflite::CreatePadOptions(b).Union();
    case QAT__TFL_TRANSPOSE:
        *type = tflite::BuiltinOptions_TransposeOptions;
        return tflite::CreateTransposeOptions(b).Union();
    default:
        *type = tflite::BuiltinOptions_NONE;
        return 0;
    }
}

flatbuffers::DetachedBuffer build(const qat__tfl_graph &g) {
    flatbuffers::FlatBufferBuilder b(1 << 16);
    // buffers: 0 is the empty one; then one per constant tensor
    std::vector<flatbuffers::Offset<tflite::Buffer>> buffers{tflite::CreateBuffer(b)};
    std::vector<flatbuffers::Offset<tflite::Tensor>> tensors;
    for (int i = 0; i < g.n_tensors; i++) {
        const qat__tfl_tensor &t = g.tensors[i];
        uint32_t buffer = 0;
        if (t.data) {
            b.ForceVectorAlignment(t.bytes, 1, 16);
            auto data = b.CreateVector(static_cast<const uint8_t *>(t.data), t.bytes);
            buffer = static_cast<uint32_t>(buffers.size());
            buffers.push_back(tflite::CreateBuffer(b, data));
        }
        flatbuffers::Offset<tflite::QuantizationParameters> q = 0;
        if (t.n_q > 0) {
            std::vector<float> scale(t.scale, t.scale + t.n_q);
            std::vector<int64_t> zp(t.zero_point, t.zero_point + t.n_q);
            q = tflite::CreateQuantizationParametersDirect(b, nullptr, nullptr, &scale, &zp,
                                                           tflite::QuantizationDetails_NONE, 0, t.qdim);
        }
        std::vector<int32_t> shape(t.shape, t.shape + t.rank);
        tensors.push_back(tflite::CreateTensorDirect(b, &shape, static_cast<tflite::TensorType>(t.type), buffer,
                                                     t.name, q));
    }
    // one operator code per distinct built-in and version
    std::vector<std::pair<int, int>> codes;
    std::vector<flatbuffers::Offset<tflite::Operator>> ops;
    for (int i = 0; i < g.n_ops; i++) {
        const qat__tfl_op &op = g.ops[i];
        std::pair<int, int> code{op.code, op.version};
        uint32_t index = 0;
        while (index < codes.size() && codes[index] != code) index++;
        if (index == codes.size()) codes.push_back(code);
        std::vector<int32_t> in(op.in, op.in + op.n_in), out{op.out};
        tflite::BuiltinOptions type;
        auto opt = options(b, op, &type);
        ops.push_back(tflite::CreateOperatorDirect(b, index, &in, &out, type, opt));
    }
    std::vector<flatbuffers::Offset<tflite::OperatorCode>> opcodes;
    for (auto c : codes)
        opcodes.push_back(tflite::CreateOperatorCode(b, static_cast<int8_t>(c.first < 127 ? c.first : 127), 0,
                                                     c.second, static_cast<tflite::BuiltinOperator>(c.first)));
    std::vector<int32_t> inputs{g.input}, outputs{g.output};
    auto subgraph = tflite::CreateSubGraphDirect(b, &tensors, &inputs, &outputs, &ops, "main");
    std::vector<flatbuffers::Offset<tflite::SubGraph>> subgraphs{subgraph};
    // the signature names the input and output as the program does
    std::vector<flatbuffers::Offset<tflite::TensorMap>> sin{
        tflite::CreateTensorMapDirect(b, "input", static_cast<uint32_t>(g.input))};
    std::vector<flatbuffers::Offset<tflite::TensorMap>> sout{
        tflite::CreateTensorMapDirect(b, "output", static_cast<uint32_t>(g.output))};
    std::vector<flatbuffers::Offset<tflite::SignatureDef>> sigs{
        tflite::CreateSignatureDefDirect(b, &sin, &sout, "serving_default", 0)};
    auto model = tflite::CreateModelDirect(b, 3, &opcodes, &subgraphs, g.description, &buffers, nullptr, nullptr,
                                           &sigs);
    tflite::FinishModelBuffer(b, model);
    return b.Release();
}

} // namespace

extern "C" qat_status qat__tfl_serialize(const qat__tfl_graph *g, uint8_t **bytes, size_t *size, char *msg,
                                         size_t len) {
    *bytes = nullptr, *size = 0;
    try {
        flatbuffers::DetachedBuffer buf = build(*g);
        flatbuffers::Verifier v(buf.data(), buf.size());
        if (!tflite::VerifyModelBuffer(v)) {
            say(msg, len, "tflite: the flatbuffers verifier refused the model it was given");
            return QAT_ERR_STATE;
        }
        uint8_t *out = static_cast<uint8_t *>(std::malloc(buf.size()));
        if (!out) return say(msg, len, "tflite: out of memory"), QAT_ERR_NOMEM;
        std::memcpy(out, buf.data(), buf.size());
        *bytes = out, *size = buf.size();
        return QAT_OK;
    } catch (const std::bad_alloc &) {
        say(msg, len, "tflite: out of memory");
        return QAT_ERR_NOMEM;
    } catch (...) {
        say(msg, len, "tflite: the flatbuffers builder failed (a model over 2 GiB?)");
        return QAT_ERR_STATE;
    }
}
