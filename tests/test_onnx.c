/* The ONNX export (qat/onnx.h): a model of every op kind exported and read
 * back (protobuf-c) — one QDQ group per integer op, the weights' integers
 * and scales, the fused clamps, the metadata — and checked by Debian's
 * onnx.checker; run by onnxruntime (PyPI, .venv/) against the int engine when it is
 * installed (tests/onnx); refusals (float model, sub-channel and wide
 * weights, repeated names) that leave no file; the atomic write. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "qat_onnx.pb-c.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/onnx.h"
#include "qat/optim.h"
#include "model_util.h"
#include "test_util.h"

static char dir[256];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* Every op kind of the integer program (test_util.h). */
static const char *const every_op_text = QAT_TEST_EVERY_OP;

/* Builds, prepares (cfg, or the defaults) and warms up a model from text. */
static qat_model *model_of(qat_ctx *ctx, const char *text, const qat_prepare_config *cfg, bool prepare) {
    qat_model *m = qat_model_new(ctx);
    qat_status st = qat_model_from_text(m, text, "test");
    if (st == QAT_OK) st = qat_model_build(m, 3);
    if (st == QAT_OK && prepare) st = qat_prepare(m, cfg);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    int64_t shape[3];
    int rank = qat_model_input_shape(m, shape);
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    if (prepare) qat_test_warm_up(m, rank, shape, 6, &rng);
    return m;
}

static Qat__Onnx__ModelProto *read_model(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return qat__onnx__model_proto__unpack(NULL, n, buf);
}

static const Qat__Onnx__NodeProto *node_named(const Qat__Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++)
        if (!strcmp(g->node[i]->name, name)) return g->node[i];
    return NULL;
}

/* The node whose output is value (NULL: a graph input or an initializer). */
static const Qat__Onnx__NodeProto *producer(const Qat__Onnx__GraphProto *g, const char *value) {
    for (size_t i = 0; i < g->n_node; i++)
        if (!strcmp(g->node[i]->output[0], value)) return g->node[i];
    return NULL;
}

static const Qat__Onnx__TensorProto *initializer(const Qat__Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (!strcmp(g->initializer[i]->name, name)) return g->initializer[i];
    return NULL;
}

static const Qat__Onnx__AttributeProto *attribute(const Qat__Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; n && i < n->n_attribute; i++)
        if (!strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

static const char *metadata(const Qat__Onnx__ModelProto *m, const char *key) {
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (!strcmp(m->metadata_props[i]->key, key)) return m->metadata_props[i]->value;
    return NULL;
}

static float f32_at(const Qat__Onnx__TensorProto *t, size_t i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; k++) u |= (uint32_t)t->raw_data.data[4 * i + (size_t)k] << (8 * k);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int32_t i32_at(const Qat__Onnx__TensorProto *t, size_t i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; k++) u |= (uint32_t)t->raw_data.data[4 * i + (size_t)k] << (8 * k);
    return (int32_t)u;
}

/* Runs tests/onnx/check.py (Debian's onnx.checker, full_check) on path:
 * 0 passed, 1 failed, -1 the checker is not installed. */
static int checker(const char *path) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src || system("/usr/bin/python3 -c 'import onnx' 2>/dev/null") != 0) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/onnx/check.py' '%s' >/dev/null", src, path);
    return system(cmd) == 0 ? 0 : 1;
}

/* The files in the test directory (an export must leave no temporary). */
static int files_in_dir(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || strstr(e->d_name, ".qat-tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* ---- the graph -------------------------------------------------------------------------- */

/* The QDQ group of every op: the layer's node reads DequantizeLinear
 * outputs and feeds (through its clamp) the QuantizeLinear of its tensor
 * with that tensor's scale and zero point. */
static void check_groups(const Qat__Onnx__GraphProto *g, const qat_qmodel *q) {
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        const qat_qtensor *out = &q->tensors[op->output];
        const Qat__Onnx__NodeProto *n = node_named(g, op->name);
        CU_ASSERT_FATAL(n != NULL);
        if (op->kind == QAT_QOP_LUT && op->lut == QAT_LUT_TABLE) {
            /* the table alone: Gather(real values, int32(input's integers) - qmin) */
            const Qat__Onnx__NodeProto *sub = producer(g, n->input[1]);
            CU_ASSERT_FATAL(initializer(g, n->input[0]) && sub && !strcmp(sub->op_type, "Sub"));
            const Qat__Onnx__NodeProto *cast = producer(g, sub->input[0]);
            CU_ASSERT_FATAL(cast && !strcmp(cast->op_type, "Cast"));
            char in_q[64];
            snprintf(in_q, sizeof in_q, "%s.q", q->tensors[op->inputs[0]].name);
            CU_ASSERT_STRING_EQUAL(cast->input[0], in_q);
        } else
            for (size_t j = 0; j < (size_t)op->n_inputs; j++) {
                const Qat__Onnx__NodeProto *in = producer(g, n->input[j]);
                CU_ASSERT(in && !strcmp(in->op_type, "DequantizeLinear"));
            }
        char qname[64];
        snprintf(qname, sizeof qname, "%s.q", out->name);
        const Qat__Onnx__NodeProto *qn = producer(g, qname);
        CU_ASSERT_FATAL(qn != NULL);
        /* a clamp narrower than int8's saturation: an integer Clip after the Q */
        bool saturates = op->act_min <= -128 && op->act_max >= 127;
        if (!saturates && op->kind != QAT_QOP_GLOBAL_AVGPOOL) {
            CU_ASSERT_STRING_EQUAL_FATAL(qn->op_type, "Clip");
            const Qat__Onnx__TensorProto *lo = initializer(g, qn->input[1]), *hi = initializer(g, qn->input[2]);
            CU_ASSERT_FATAL(lo && hi);
            CU_ASSERT((int8_t)lo->raw_data.data[0] == op->act_min && (int8_t)hi->raw_data.data[0] == op->act_max);
            qn = producer(g, qn->input[0]);
            CU_ASSERT_FATAL(qn != NULL);
        }
        CU_ASSERT_STRING_EQUAL_FATAL(qn->op_type, "QuantizeLinear");
        const Qat__Onnx__TensorProto *s = initializer(g, qn->input[1]), *z = initializer(g, qn->input[2]);
        CU_ASSERT_FATAL(s && z);
        CU_ASSERT_EQUAL(s->n_dims, 0);
        CU_ASSERT_EQUAL(f32_at(s, 0), out->q.scale);
        CU_ASSERT_EQUAL(z->data_type, QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT8);
        CU_ASSERT_EQUAL((int8_t)z->raw_data.data[0], out->q.zero_point);
        /* a clamp that QuantizeLinear's saturation makes redundant: Relu, or Clip(0, ~6), before the Q */
        const Qat__Onnx__NodeProto *before = producer(g, qn->input[0]);
        CU_ASSERT_FATAL(before != NULL);
        if (saturates && op->act == QAT_ACT_RELU) CU_ASSERT_STRING_EQUAL(before->op_type, "Relu");
        if (saturates && op->act == QAT_ACT_RELU6) {
            CU_ASSERT_STRING_EQUAL_FATAL(before->op_type, "Clip");
            const Qat__Onnx__TensorProto *lo = initializer(g, before->input[1]), *hi = initializer(g, before->input[2]);
            CU_ASSERT_FATAL(lo && hi);
            CU_ASSERT_EQUAL(f32_at(lo, 0), 0.0f);
            CU_ASSERT_EQUAL(f32_at(hi, 0), out->q.scale * (float)(op->act_max - out->q.zero_point));
            CU_ASSERT(f32_at(hi, 0) <= 6.0f + out->q.scale); /* 6, or the top of a range that never reached it */
        }
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        /* int8 weights per output channel (axis 0), int32 bias at s_in·s_w, zero point 0 */
        char name[64];
        snprintf(name, sizeof name, "%s.weight", op->name);
        const Qat__Onnx__NodeProto *wd = producer(g, name);
        CU_ASSERT_FATAL(wd && !strcmp(wd->op_type, "DequantizeLinear"));
        const Qat__Onnx__AttributeProto *axis = attribute(wd, "axis");
        CU_ASSERT(axis && axis->i == 0);
        const Qat__Onnx__TensorProto *w = initializer(g, wd->input[0]), *ws = initializer(g, wd->input[1]);
        CU_ASSERT_FATAL(w && ws);
        CU_ASSERT_EQUAL(w->data_type, QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT8);
        CU_ASSERT_EQUAL((int)w->n_dims, op->wq.rank);
        int64_t O = op->wq.shape[0], numel = (int64_t)w->raw_data.len, bad = 0;
        CU_ASSERT_EQUAL(ws->n_dims == 1 ? ws->dims[0] : -1, O);
        for (int64_t k = 0; k < numel; k++) bad += (int8_t)w->raw_data.data[k] != op->weight[k];
        for (int64_t o = 0; o < O; o++) bad += f32_at(ws, (size_t)o) != op->wq.scale[o];
        snprintf(name, sizeof name, "%s.bias", op->name);
        const Qat__Onnx__NodeProto *bd = producer(g, name);
        CU_ASSERT_FATAL(bd != NULL);
        const Qat__Onnx__TensorProto *b = initializer(g, bd->input[0]), *bs = initializer(g, bd->input[1]),
                                *bz = initializer(g, bd->input[2]);
        CU_ASSERT_FATAL(b && bs && bz);
        CU_ASSERT_EQUAL(b->data_type, QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
        float s_in = q->tensors[op->inputs[0]].q.scale;
        for (int64_t o = 0; o < O; o++) {
            bad += i32_at(b, (size_t)o) != op->bias[o] || i32_at(bz, (size_t)o) != 0;
            bad += f32_at(bs, (size_t)o) != (float)((double)s_in * (double)op->wq.scale[o]);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
}

static void test_every_op_exports_and_checks(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = model_of(ctx, every_op_text, NULL, true);
    char path[300];
    path_of(path, sizeof path, "every.onnx");
    qat_status st = qat_onnx_export(m, 0, NULL, "{\"run\": \"test\"}", path);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    int kinds[QAT_QOP_KIND_COUNT] = {0};
    for (int i = 0; i < q.n_ops; i++) kinds[q.ops[i].kind]++;
    for (int k = 0; k < QAT_QOP_KIND_COUNT; k++) CU_ASSERT(kinds[k] > 0 || k == QAT_QOP_FLATTEN);
    Qat__Onnx__ModelProto *mp = read_model(path);
    CU_ASSERT_FATAL(mp && mp->graph);
    const Qat__Onnx__GraphProto *g = mp->graph;
    CU_ASSERT_EQUAL(mp->ir_version, QAT_ONNX_IR_VERSION);
    CU_ASSERT(mp->n_opset_import == 1 && mp->opset_import[0]->version == QAT_ONNX_OPSET);
    /* the input: the float image, batch symbolic; the output: float logits */
    CU_ASSERT_FATAL(g->n_input == 1 && g->n_output == 1);
    CU_ASSERT_STRING_EQUAL(g->input[0]->name, "input");
    const Qat__Onnx__TensorShapeProto *is = g->input[0]->type->tensor_type->shape;
    CU_ASSERT_EQUAL(g->input[0]->type->tensor_type->elem_type, QAT__ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    CU_ASSERT_FATAL(is->n_dim == 4);
    CU_ASSERT_STRING_EQUAL(is->dim[0]->dim_param, "N");
    CU_ASSERT(is->dim[1]->dim_value == 2 && is->dim[2]->dim_value == 10 && is->dim[3]->dim_value == 9);
    CU_ASSERT_STRING_EQUAL(g->output[0]->name, "logits");
    CU_ASSERT_STRING_EQUAL(producer(g, "logits")->op_type, "DequantizeLinear");
    CU_ASSERT_STRING_EQUAL(producer(g, "input.q")->op_type, "QuantizeLinear");
    /* one node per op of qat's program, of the matching ONNX type */
    static const char *const type_of[QAT_QOP_KIND_COUNT] = {"Gemm", "Conv", "MaxPool", "AveragePool", "Flatten",
                                                            "Relu", "Add", "Concat", "GlobalAveragePool", "",
                                                            "Mul"};
    for (int i = 0; i < q.n_ops; i++) {
        const qat_qop *op = &q.ops[i];
        const Qat__Onnx__NodeProto *n = node_named(g, op->name);
        CU_ASSERT_FATAL(n != NULL);
        const char *want = op->kind == QAT_QOP_LUT ? (const char *[]){"Sigmoid", "Tanh", "HardSwish", "Gather"}[op->lut]
                                                   : type_of[op->kind];
        if (strcmp(n->op_type, want)) printf("\n  %s: %s, want %s\n", op->name, n->op_type, want);
        CU_ASSERT_STRING_EQUAL(n->op_type, want);
        if (op->kind == QAT_QOP_CONV2D) {
            const Qat__Onnx__AttributeProto *gr = attribute(n, "group"), *st2 = attribute(n, "strides"),
                                       *pads = attribute(n, "pads"), *k = attribute(n, "kernel_shape");
            CU_ASSERT_FATAL(gr && st2 && pads && k);
            CU_ASSERT_EQUAL(gr->i, op->groups);
            CU_ASSERT(k->ints[0] == op->kh && k->ints[1] == op->kw);
            CU_ASSERT(st2->ints[0] == op->stride_h && st2->ints[1] == op->stride_w);
            CU_ASSERT(pads->ints[0] == op->pad_h && pads->ints[1] == op->pad_w && pads->ints[2] == op->pad_h);
        }
        if (op->kind == QAT_QOP_AVGPOOL2D) CU_ASSERT(attribute(n, "count_include_pad")->i == 1);
    }
    CU_ASSERT_EQUAL(node_named(g, "dw") ? attribute(node_named(g, "dw"), "group")->i : 0, 8); /* depthwise */
    check_groups(g, &q);
    /* metadata: format, producer, training configuration, every weight's MLIR type */
    CU_ASSERT_STRING_EQUAL(metadata(mp, "qat.format"), QAT_QMODEL_FORMAT);
    char version[16];
    snprintf(version, sizeof version, "%d", qat_qmodel_file_version(&q)); /* the HDF5 file's version */
    CU_ASSERT_STRING_EQUAL(metadata(mp, "qat.format_version"), version);
    CU_ASSERT_STRING_EQUAL(metadata(mp, "qat.training_config"), "{\"run\": \"test\"}");
    CU_ASSERT(metadata(mp, "qat.producer") && !strncmp(metadata(mp, "qat.producer"), "qat ", 4));
    for (int i = 0; i < q.n_ops; i++) {
        if (q.ops[i].kind != QAT_QOP_LINEAR && q.ops[i].kind != QAT_QOP_CONV2D) continue;
        char key[64], want[4096];
        snprintf(key, sizeof key, "qat.weight_type.%s", q.ops[i].name);
        qat_qtype_to_mlir(&q.ops[i].wq, want, sizeof want);
        CU_ASSERT(metadata(mp, key) && !strcmp(metadata(mp, key), want));
    }
    qat__onnx__model_proto__free_unpacked(mp, NULL);
    /* serialize gives the file's bytes */
    q.config = "{\"run\": \"test\"}";
    uint8_t *bytes;
    size_t size;
    char msg[400];
    CU_ASSERT_EQUAL_FATAL(qat_onnx_serialize(&q, &bytes, &size, msg, sizeof msg), QAT_OK);
    struct stat sb;
    CU_ASSERT(stat(path, &sb) == 0 && (size_t)sb.st_size == size);
    free(bytes);
    int rc = checker(path);
    qat_ctx_free(ctx);
    if (rc < 0) QAT_TEST_SKIP("python3-onnx is not installed: onnx.checker did not run");
    CU_ASSERT_EQUAL(rc, 0);
}

/* Sub-8-bit activations: every QuantizeLinear whose int8 saturation is
 * wider than the type is followed by an integer Clip to the op's clamp. */
static void test_narrow_activations_are_clipped(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.abits = 4, cfg.wbits = 4;
    qat_model *m = model_of(ctx, every_op_text, &cfg, true);
    char path[300];
    path_of(path, sizeof path, "narrow.onnx");
    qat_status st = qat_onnx_export(m, 0, NULL, NULL, path);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    Qat__Onnx__ModelProto *mp = read_model(path);
    CU_ASSERT_FATAL(mp != NULL);
    int unclamped = 0, narrow = 0;
    for (int i = 0; i < q.n_ops; i++) {
        const qat_qop *op = &q.ops[i];
        const qat_aparams *a = &q.tensors[op->output].q;
        if (a->qmin == -128 && a->qmax == 127) continue; /* 8-bit: the logits (io_bits) */
        if (op->kind == QAT_QOP_MAXPOOL2D || op->kind == QAT_QOP_FLATTEN) continue; /* integers kept as they are */
        narrow++;
        char name[64]; /* a global pool's clamp is on the pooled [N, C, 1, 1] tensor, before the Flatten */
        snprintf(name, sizeof name, "%s%s", q.tensors[op->output].name, op->kind == QAT_QOP_GLOBAL_AVGPOOL ? ".pool.q" : ".q");
        const Qat__Onnx__NodeProto *n = producer(mp->graph, name);
        const Qat__Onnx__NodeProto *in = n && n->n_input == 3 ? producer(mp->graph, n->input[0]) : NULL;
        const Qat__Onnx__TensorProto *lo = n ? initializer(mp->graph, n->input[1]) : NULL;
        bool ok = n && !strcmp(n->op_type, "Clip") && in && !strcmp(in->op_type, "QuantizeLinear") && lo &&
                  lo->data_type == QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT8 && (int8_t)lo->raw_data.data[0] == op->act_min;
        if (!ok) printf("\n  %s: not an integer Clip of a QuantizeLinear\n", name);
        unclamped += !ok;
    }
    CU_ASSERT(narrow >= 8);
    CU_ASSERT_EQUAL(unclamped, 0);
    qat__onnx__model_proto__free_unpacked(mp, NULL);
    int rc = checker(path);
    qat_ctx_free(ctx);
    if (rc >= 0) CU_ASSERT_EQUAL(rc, 0);
}

/* ---- onnxruntime against the int engine --------------------------------------------------- */

/* The Python with onnxruntime (QAT_PYTHON: ctest passes .venv/bin/python,
 * made by scripts/setup-python.sh); NULL when it cannot import it. */
static const char *onnxruntime_python(void) {
    const char *py = getenv("QAT_PYTHON");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import onnxruntime' 2>/dev/null", py ? py : "");
    return py && system(cmd) == 0 ? py : NULL;
}

/* The every-op model on random inputs through onnxruntime, fused (its
 * integer kernels) and unoptimized (the graph's float semantics): the
 * output integers against the int engine's. They differ where the two
 * round a requantization differently (docs/onnx.md): at most by a few
 * steps, and mostly not at all. */
static void test_onnxruntime_runs_every_op(void) {
    const char *src = getenv("QAT_SOURCE_DIR"), *py = onnxruntime_python();
    /* not a skip: the suite's setup (scripts/setup-python.sh) always provides it */
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    if (!py) printf("\nQAT_PYTHON=%s cannot import onnxruntime: run scripts/setup-python.sh\n", getenv("QAT_PYTHON") ? getenv("QAT_PYTHON") : "(unset)");
    CU_ASSERT_PTR_NOT_NULL_FATAL(py);
    /* W8A8; W4A4 (an integer Clip after every QuantizeLinear); W8A8 with symmetric activations (zero
     * point 0: the ReLUs clamp above the bottom of int8, integer Clips again) */
    for (int variant = 0; variant < 3; variant++) {
        int bits = variant == 1 ? 4 : 8;
        qat_ctx *ctx = qat_ctx_new();
        qat_prepare_config cfg = qat_prepare_defaults();
        cfg.abits = bits, cfg.wbits = bits, cfg.a_symmetric = variant == 2; /* W4A4: int8 values in [-7, 7] */
        qat_model *m = model_of(ctx, every_op_text, &cfg, true);
        char model[300], in[300], out[300], opt[300], cmd[2048];
        path_of(model, sizeof model, "every-ort.onnx");
        path_of(in, sizeof in, "every.f32");
        path_of(out, sizeof out, "every-ort.f32");
        path_of(opt, sizeof opt, "every-ort.opt.onnx");
        CU_ASSERT_EQUAL_FATAL(qat_onnx_export(m, 0, NULL, NULL, model), QAT_OK);
        qat_qmodel q;
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
        enum { N = 256, IN = 2 * 10 * 9, K = 5 };
        static float x[N * IN], lo[N * K];
        static int32_t qi[N * K];
        qat_rng rng;
        qat_rng_seed(&rng, 4);
        for (int i = 0; i < N * IN; i++) x[i] = qat_rng_normal(&rng);
        FILE *f = fopen(in, "wb");
        CU_ASSERT_FATAL(f && fwrite(x, sizeof x, 1, f) == 1);
        fclose(f);
        static int32_t qf[N * K];
        qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N), *fe = qat_engine_new(ctx, &q, QAT_ENGINE_FAKE, N);
        CU_ASSERT_FATAL(e && fe);
        CU_ASSERT_EQUAL(qat_engine_run(e, x, N, NULL, qi), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, NULL, qf), QAT_OK);
        const qat_aparams *o = &q.tensors[q.output].q;
        for (int level = 0; level < 2; level++) {
            snprintf(cmd, sizeof cmd, "'%s' '%s/tests/onnx/ort_run.py' '%s' --input '%s' --shape 2,10,9 --logits '%s' "
                     "--level %s --optimized '%s' >/dev/null", py, src, model, in, out, level ? "disabled" : "all", opt);
            CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
            f = fopen(out, "rb");
            CU_ASSERT_FATAL(f && fread(lo, sizeof lo, 1, f) == 1);
            fclose(f);
            int same = 0, fsame = 0, maxd = 0, fmaxd = 0;
            for (int i = 0; i < N * K; i++) {
                int32_t v = (int32_t)lrintf(lo[i] / o->scale) + o->zero_point, d = abs(v - qi[i]), fd = abs(v - qf[i]);
                same += d == 0, maxd = d > maxd ? d : maxd;
                fsame += fd == 0, fmaxd = fd > fmaxd ? fd : fmaxd;
            }
            printf(" [W%dA%d%s, onnxruntime %s: output integers = int engine %d / %d (max |diff| %d), = fake %d (max %d)]",
                   bits, bits, variant == 2 ? " symmetric" : "", level ? "unoptimized" : "fused", same, N * K, maxd, fsame, fmaxd);
            /* the exported graph computes what QAT trained: the fake-quantized model, rounding once per
             * requantization; the int engine rounds twice (gemmlowp), so it differs by a step here and there */
            CU_ASSERT(fsame >= N * K * 99 / 100 && fmaxd <= 1);
            if (variant == 0) CU_ASSERT(same >= N * K * 7 / 10 && maxd <= 3);
            if (level) continue;
            /* onnxruntime fused every op it has an integer kernel for (not Tanh, HardSwish) */
            Qat__Onnx__ModelProto *om = read_model(opt);
            CU_ASSERT_FATAL(om != NULL);
            int fused = 0;
            for (size_t i = 0; i < om->graph->n_node; i++) {
                const Qat__Onnx__NodeProto *nd = om->graph->node[i];
                fused += !strncmp(nd->op_type, "QLinear", 7) || !strcmp(nd->op_type, "QGemm");
            }
            printf(" [%d integer kernels]", fused);
            CU_ASSERT(fused >= 10); /* 3 Conv, Gemm, 2 Add, Concat, AveragePool, GlobalAveragePool, Sigmoid */
            qat__onnx__model_proto__free_unpacked(om, NULL);
        }
        qat_engine_free(fe);
        qat_engine_free(e);
        qat_ctx_free(ctx);
    }
}

/* ---- the input normalization: raw inputs, qat's input integers --------------------------- */

/* Writes model `path` again as `probe` with one more graph output: the
 * int8 value "input.q", the input integers. */
static bool write_probe(const char *path, const char *probe) {
    Qat__Onnx__ModelProto *mp = read_model(path);
    if (!mp || !mp->graph) return false;
    Qat__Onnx__GraphProto *g = mp->graph;
    Qat__Onnx__ValueInfoProto vi, *outs[8];
    Qat__Onnx__TypeProto tp;
    Qat__Onnx__TypeProto__Tensor tt;
    qat__onnx__value_info_proto__init(&vi), qat__onnx__type_proto__init(&tp), qat__onnx__type_proto__tensor__init(&tt);
    tt.has_elem_type = 1, tt.elem_type = QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    tp.value_case = QAT__ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp.tensor_type = &tt;
    vi.name = "input.q", vi.type = &tp;
    size_t n = g->n_output;
    Qat__Onnx__ValueInfoProto **old = g->output;
    for (size_t i = 0; i < n && i < 7; i++) outs[i] = old[i];
    outs[n] = &vi;
    g->output = outs, g->n_output = n + 1;
    size_t len = qat__onnx__model_proto__get_packed_size(mp);
    uint8_t *buf = malloc(len);
    bool ok = buf && qat__onnx__model_proto__pack(mp, buf) == len;
    g->output = old, g->n_output = n; /* the unpacked message frees only its own */
    qat__onnx__model_proto__free_unpacked(mp, NULL);
    FILE *f = ok ? fopen(probe, "wb") : NULL;
    ok = f && fwrite(buf, 1, len, f) == len;
    if (f) fclose(f);
    free(buf);
    return ok;
}

/* A model trained on raw pixels with a per-channel normalization: its ONNX
 * graph takes the raw image (Div, Sub, Div in the model's order, then the
 * product by 1/scale and a QuantizeLinear at scale 1), and onnxruntime,
 * fused and unoptimized, computes qat's input integers on every byte value
 * of every channel (one sample of [3, 16, 16] holds each once per channel),
 * and then logits within a step of qat's fake-quantized engine. */
static void normalized_input_case(int io_bits) {
    const char *src = getenv("QAT_SOURCE_DIR"), *py = onnxruntime_python();
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    if (!py) printf("\nQAT_PYTHON=%s cannot import onnxruntime: run scripts/setup-python.sh\n", getenv("QAT_PYTHON") ? getenv("QAT_PYTHON") : "(unset)");
    CU_ASSERT_PTR_NOT_NULL_FATAL(py);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = model_of(ctx, "input shape=3,16,16\n"
                                 "conv2d c  input out=4 kernel=3 pad=1\n"
                                 "relu   r  c\n"
                                 "global_avgpool g r\n"
                                 "linear fc g out=3\n", NULL, false);
    static qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = 3, n.divisor = 255.0f, n.raw_uint8 = true;
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    memcpy(n.mean, mean, sizeof mean), memcpy(n.std, std, sizeof std);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.io_bits = io_bits; /* under 8 bits: an integer Clip after the input's QuantizeLinear */
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &cfg), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 31);
    for (int i = 0; i < 4; i++) { /* observe raw bytes */
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){8, 3, 16, 16}, false);
        for (int64_t j = 0; x && j < x->numel; j++) x->data[j] = (float)qat_rng_below(&rng, 256);
        CU_ASSERT_PTR_NOT_NULL(qat_model_forward(m, x));
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    char model[300], probe[300], in[300], out[300], cmd[2048];
    path_of(model, sizeof model, "norm.onnx");
    path_of(probe, sizeof probe, "norm-probe.onnx");
    path_of(in, sizeof in, "norm.f32");
    path_of(out, sizeof out, "norm-ort.f32");
    CU_ASSERT_EQUAL_FATAL(qat_onnx_export(m, 0, NULL, NULL, model), QAT_OK);
    /* the graph: input -> Div -> Sub -> Div -> Mul -> QuantizeLinear (scale 1) -> input.q */
    Qat__Onnx__ModelProto *mp = read_model(model);
    CU_ASSERT_FATAL(mp && mp->graph);
    const Qat__Onnx__GraphProto *g = mp->graph;
    const char *chain[6] = {"Clip", "QuantizeLinear", "Mul", "Div", "Sub", "Div"};
    const char *v = "input.q";
    for (int k = io_bits < 8 ? 0 : 1; k < 6; k++) {
        const Qat__Onnx__NodeProto *nd = producer(g, v);
        CU_ASSERT_FATAL(nd != NULL);
        CU_ASSERT_STRING_EQUAL(nd->op_type, chain[k]);
        v = nd->input[0];
    }
    CU_ASSERT_STRING_EQUAL(v, "input");
    const Qat__Onnx__TensorProto *mt = initializer(g, "input.mean"), *us = initializer(g, "input.unit_scale");
    CU_ASSERT_FATAL(mt && us);
    CU_ASSERT(mt->n_dims == 4 && mt->dims[1] == 3 && f32_at(mt, 2) == mean[2] && f32_at(us, 0) == 1.0f);
    const char *meta = metadata(mp, "qat.normalization");
    CU_ASSERT_FATAL(meta != NULL);
    CU_ASSERT_STRING_EQUAL(meta, "channels=3 divisor=255 mean=0.491400003,0.482199997,0.446500003 "
                                 "std=0.246999994,0.243499994,0.261599988 raw_uint8=1");
    qat__onnx__model_proto__free_unpacked(mp, NULL);
    int rc = checker(model); /* onnx.checker, where Debian's python3-onnx is installed */
    if (rc >= 0) CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_FATAL(write_probe(model, probe));
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    enum { N = 16, IN = 3 * 256, K = 3 };
    static float x[N * IN], lo[N * IN], fl[N * K];
    static int32_t qf[N * K];
    static int8_t table[3 * 256];
    CU_ASSERT_EQUAL_FATAL(qat_input_table(&q, table), QAT_OK);
    for (int i = 0; i < N * IN; i++) x[i] = i < IN ? (float)(i % 256) : (float)qat_rng_below(&rng, 256);
    FILE *f = fopen(in, "wb");
    CU_ASSERT_FATAL(f && fwrite(x, sizeof x, 1, f) == 1);
    fclose(f);
    qat_engine *fe = qat_engine_new(ctx, &q, QAT_ENGINE_FAKE, N);
    CU_ASSERT_FATAL(fe != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, NULL, qf), QAT_OK);
    const qat_aparams *o = &q.tensors[q.output].q;
    for (int level = 0; level < 2; level++) {
        snprintf(cmd, sizeof cmd, "'%s' '%s/tests/onnx/ort_run.py' '%s' --input '%s' --shape 3,16,16 --logits '%s' "
                 "--output input.q --level %s >/dev/null", py, src, probe, in, out, level ? "disabled" : "all");
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        f = fopen(out, "rb");
        CU_ASSERT_FATAL(f && fread(lo, sizeof lo, 1, f) == 1);
        fclose(f);
        int same = 0;
        for (int i = 0; i < IN; i++) same += lo[i] == (float)table[(i / 256) * 256 + i % 256]; /* sample 0: every byte */
        printf(" [%d-bit input, onnxruntime %s: input integers = qat's on %d of %d byte values]", io_bits,
               level ? "unoptimized" : "fused", same, IN);
        CU_ASSERT_EQUAL(same, IN);
        snprintf(cmd, sizeof cmd, "'%s' '%s/tests/onnx/ort_run.py' '%s' --input '%s' --shape 3,16,16 --logits '%s' "
                 "--level %s >/dev/null", py, src, model, in, out, level ? "disabled" : "all");
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        f = fopen(out, "rb");
        CU_ASSERT_FATAL(f && fread(fl, sizeof fl, 1, f) == 1);
        fclose(f);
        int fsame = 0, fmaxd = 0;
        for (int i = 0; i < N * K; i++) {
            int32_t d = abs((int32_t)lrintf(fl[i] / o->scale) + o->zero_point - qf[i]);
            fsame += d == 0, fmaxd = d > fmaxd ? d : fmaxd;
        }
        CU_ASSERT(fsame >= N * K * 9 / 10 && fmaxd <= 1);
    }
    qat_engine_free(fe);
    qat_ctx_free(ctx);
}

static void test_onnxruntime_normalized_input(void) {
    normalized_input_case(8);
    normalized_input_case(6);
}

/* ---- refusals and the atomic write ------------------------------------------------------- */

/* An export that fails leaves what was at the path untouched, and no
 * temporary file beside it. */
static void expect_refusal(qat_model *m, qat_status want, const char *needle) {
    char path[300];
    path_of(path, sizeof path, "refused.onnx");
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    int before = files_in_dir();
    qat_status st = qat_onnx_export(m, 0, NULL, NULL, path);
    CU_ASSERT_EQUAL(st, want);
    const char *msg = qat_ctx_error(qat_model_ctx(m));
    if (!strstr(msg, needle)) printf("\n  message: %s (want \"%s\")\n", msg, needle);
    CU_ASSERT(strstr(msg, needle) != NULL);
    char buf[16] = "";
    f = fopen(path, "r");
    CU_ASSERT(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "old"));
    if (f) fclose(f);
    CU_ASSERT_EQUAL(files_in_dir(), before);
    remove(path);
    qat_ctx_clear_error(qat_model_ctx(m));
}

static const char *const small_text = "input shape=1,6,6\n"
                                      "conv2d c  input out=4 kernel=3 pad=1\n"
                                      "relu   r  c\n"
                                      "flatten f r\n"
                                      "linear fc f out=3\n";

static void test_refusals_leave_no_file(void) {
    qat_ctx *ctx = qat_ctx_new();
    /* a float model: nothing to export to integers */
    qat_model *fm = model_of(ctx, small_text, NULL, false);
    expect_refusal(fm, QAT_ERR_STATE, "prepared");
    /* sub-channel weights: no ONNX form before opset 21; the error names the layer */
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.wgran = QAT_GRAN_BLOCK, cfg.block = 4;
    qat_model *bm = model_of(ctx, "input shape=16\nlinear fc input out=3\n", &cfg, true);
    expect_refusal(bm, QAT_ERR_UNSUPPORTED, "layer fc: sub-channel");
    /* weights wider than 8 bits */
    cfg = qat_prepare_defaults();
    cfg.wbits = 12;
    qat_model *wm = model_of(ctx, small_text, &cfg, true);
    expect_refusal(wm, QAT_ERR_UNSUPPORTED, "layer c: 12-bit weights");
    qat_ctx_free(ctx);
}

static void test_program_errors(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = model_of(ctx, small_text, NULL, true);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    char path[300];
    path_of(path, sizeof path, "names.onnx");
    /* two tensors of one name would be two ONNX values of one name */
    snprintf(q.tensors[2].name, sizeof q.tensors[2].name, "%s", q.tensors[1].name);
    CU_ASSERT_EQUAL(qat_onnx_save(ctx, &q, path), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "would both be named") != NULL);
    qat_ctx_clear_error(ctx);
    /* a program that fails qat_qmodel_check is not written */
    snprintf(q.tensors[2].name, sizeof q.tensors[2].name, "other");
    q.tensors[1].q.scale = -1.0f;
    CU_ASSERT_NOT_EQUAL(qat_onnx_save(ctx, &q, path), QAT_OK);
    CU_ASSERT(strncmp(qat_ctx_error(ctx), "onnx: ", 6) == 0);
    struct stat sb;
    CU_ASSERT(stat(path, &sb) != 0);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_onnx_save(NULL, &q, path), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_onnx_save(ctx, NULL, path), QAT_ERR_ARG);
    CU_ASSERT(qat_onnx_available());
    qat_ctx_free(ctx);
}

/* A second export replaces the first whole, leaves no temporary, and
 * does not grow the model's memory (the program lives in its own context). */
static void test_replace_and_memory(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = model_of(ctx, small_text, NULL, true);
    char path[300];
    path_of(path, sizeof path, "twice.onnx");
    CU_ASSERT_EQUAL_FATAL(qat_onnx_export(m, 0, NULL, "first", path), QAT_OK);
    size_t persist = qat_ctx_persist_bytes(ctx);
    int files = files_in_dir();
    CU_ASSERT_EQUAL_FATAL(qat_onnx_export(m, 0, NULL, "second", path), QAT_OK);
    CU_ASSERT_EQUAL(qat_ctx_persist_bytes(ctx), persist);
    CU_ASSERT_EQUAL(files_in_dir(), files);
    Qat__Onnx__ModelProto *mp = read_model(path);
    CU_ASSERT_FATAL(mp != NULL);
    CU_ASSERT_STRING_EQUAL(metadata(mp, "qat.training_config"), "second");
    qat__onnx__model_proto__free_unpacked(mp, NULL);
    remove(path);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "onnx")) return 2;
    const qat_test_case cases[] = {
        {"every op kind: one QDQ group per op, weights, clamps, metadata; onnx.checker", test_every_op_exports_and_checks},
        {"4-bit activations: an integer Clip after every QuantizeLinear", test_narrow_activations_are_clipped},
        {"onnxruntime (fused and unoptimized) against the int engine, every op kind", test_onnxruntime_runs_every_op},
        {"normalization: raw input; onnxruntime gives qat's input integers on every byte value", test_onnxruntime_normalized_input},
        {"float model, sub-channel and 12-bit weights: refused by name, no file", test_refusals_leave_no_file},
        {"repeated names and unchecked programs are refused", test_program_errors},
        {"a second export replaces the first; memory does not grow", test_replace_and_memory},
        {NULL, NULL},
    };
    int rc = qat_test_main("onnx", cases, argc, argv);
    qat_test_rmdir(dir);
    return rc;
}
