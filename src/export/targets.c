/* The targets' files (qat/export.h): the bytes the targets make from a
 * program (qat_onnx_serialize, qat_tflite_serialize, qat_codegen_generate) staged in save sets
 * (qat/io.h) with the quantized file, and qat_export_all, which lowers a
 * model once and writes every target from that one program. The targets
 * themselves read the program alone; the model, the contexts and the
 * files meet here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/export.h"

/* ---- one target into a set ------------------------------------------------------------ */

/* A save set of ctx's own: a plain save is a set staged, then committed at once. */
static qat_status own_set(qat_ctx *ctx, qat_save_set **set) {
    *set = qat_save_set_new(ctx);
    return *set ? QAT_OK : qat_ctx_status(ctx);
}

/* A target that makes one file's bytes from a program (ONNX, TFLite). */
typedef qat_status (*serializer)(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len);

/* The bytes of f staged in set; set NULL: saved at once (a set of its own). */
static qat_status stage_bytes(qat_ctx *ctx, const char *what, serializer f, const qat_qmodel *q, const char *path,
                              qat_save_set *set) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || !path) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: NULL program or path", what);
    if (!set) {
        qat_status st = own_set(ctx, &set);
        if (st == QAT_OK) st = stage_bytes(ctx, what, f, q, path, set);
        if (st == QAT_OK) st = qat_save_set_commit(set);
        qat_save_set_free(set);
        return st;
    }
    uint8_t *bytes;
    size_t size;
    char msg[512];
    qat_status st = f(q, &bytes, &size, msg, sizeof msg);
    if (st != QAT_OK) return qat_ctx_fail(ctx, st, "%s", msg);
    st = qat_save_set_add(set, path, bytes, size); /* nothing touches path before this */
    free(bytes);
    return st;
}

qat_status qat_onnx_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set) {
    return stage_bytes(ctx, "onnx", qat_onnx_serialize, q, path, set);
}
qat_status qat_onnx_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    return stage_bytes(ctx, "onnx", qat_onnx_serialize, q, path, NULL);
}
qat_status qat_tflite_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set) {
    return stage_bytes(ctx, "tflite", qat_tflite_serialize, q, path, set);
}
qat_status qat_tflite_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    return stage_bytes(ctx, "tflite", qat_tflite_serialize, q, path, NULL);
}

qat_status qat_codegen_stage(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name, qat_save_set *set,
                             qat_codegen_info *info) {
    return qat_codegen_stage_ex(ctx, q, dir, name, NULL, set, info);
}

qat_status qat_codegen_stage_ex(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                const qat_codegen_options *opt, qat_save_set *set, qat_codegen_info *info) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || !dir || !set) return qat_ctx_fail(ctx, QAT_ERR_ARG, "codegen: need a program, a directory and a save set");
    if (!name) name = "model";
    qat_codegen_source src;
    char msg[512];
    qat_status st = qat_codegen_generate_ex(q, name, opt, &src, msg, sizeof msg);
    if (st != QAT_OK) return qat_ctx_fail(ctx, st, "%s", msg);
    char path[4096];
    for (int k = 0; k < QAT_CODEGEN_FILES && st == QAT_OK; k++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s%s", dir, name, qat_codegen_suffix(k)) >= sizeof path)
            st = qat_ctx_fail(ctx, QAT_ERR_ARG, "codegen: directory path too long");
        else st = qat_save_set_add(set, path, src.text[k], src.size[k]);
    }
    if (st == QAT_OK && info) *info = src.info;
    qat_codegen_source_free(&src);
    return st;
}

qat_status qat_codegen_c(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                         qat_codegen_info *info) {
    if (!ctx) return QAT_ERR_ARG;
    qat_save_set *set;
    qat_status st = own_set(ctx, &set);
    if (st == QAT_OK) st = qat_codegen_stage(ctx, q, dir, name, set, info);
    if (st == QAT_OK) st = qat_save_set_commit(set);
    qat_save_set_free(set);
    return st;
}

/* ---- one export ------------------------------------------------------------------------ */

/* The runtime's plan of q for one sample: its peak activation bytes, or -1. */
static int64_t peak_of(qat_ctx *pctx, const qat_qmodel *q) {
    int64_t *offsets = qat_ctx_alloc(pctx, QAT_MEM_PERSIST, (size_t)(q->n_tensors + q->n_ops) * sizeof *offsets);
    qat_plan plan;
    return offsets && qat_plan_program(q, 1, offsets, &plan, NULL, 0) == QAT_OK ? plan.peak_activation_bytes : -1;
}

qat_status qat_export_all(qat_model *m, int in_rank, const int64_t *in_shape, const qat_export_targets *t,
                          qat_export_report *report) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = qat_model_ctx(m);
    if (!t || (!t->qmodel && !t->onnx && !t->tflite && !t->c_dir))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "export: no target (a quantized file, an ONNX file, a .tflite file or "
                            "a C directory)");
    qat_ctx *pctx = qat_ctx_new(); /* the program's memory, and the targets' errors; freed below */
    if (!pctx) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "export: out of memory");
    qat_qmodel q;
    qat_save_set *set = NULL;
    qat_codegen_info info = {0};
    qat_status st = qat_qmodel_lower(m, in_rank, in_shape, pctx, &q); /* the one lowering */
    if (st == QAT_OK) {
        q.config = t->config ? t->config : ""; /* the program carries it to every target */
        q.rounding = t->rounding;
        st = own_set(pctx, &set);
    }
    if (st == QAT_OK && t->onnx) st = qat_onnx_stage(pctx, &q, t->onnx, set);
    if (st == QAT_OK && t->tflite) st = qat_tflite_stage(pctx, &q, t->tflite, set);
    if (st == QAT_OK && t->qmodel) st = qat_qmodel_stage(pctx, &q, t->qmodel, set);
    if (st == QAT_OK && t->c_dir) st = qat_codegen_stage_ex(pctx, &q, t->c_dir, t->c_name, t->c_options, set, &info);
    if (st == QAT_OK) st = qat_save_set_commit(set);
    qat_save_set_free(set); /* removes the temporaries of a failed export: no target changed */
    if (st == QAT_OK && report)
        *report = (qat_export_report){.peak_bytes = peak_of(pctx, &q), .c = info, .n_tensors = q.n_tensors,
                                      .n_ops = q.n_ops};
    /* lowering puts its refusals (naming a layer) on the model's context, the targets on pctx */
    if (st != QAT_OK && qat_ctx_error(pctx)[0]) qat_ctx_fail(ctx, st, "%s", qat_ctx_error(pctx));
    qat_ctx_free(pctx);
    return st;
}

qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config, const char *path,
                      int64_t *peak_bytes) {
    if (!m) return QAT_ERR_ARG;
    if (!path) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "export: need a lowered model and a path");
    qat_export_report r;
    qat_status st = qat_export_all(m, in_rank, in_shape, &(qat_export_targets){.qmodel = path, .config = config}, &r);
    if (st == QAT_OK && peak_bytes) *peak_bytes = r.peak_bytes;
    return st;
}

qat_status qat_onnx_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                           const char *path) {
    if (!m) return QAT_ERR_ARG;
    if (!path) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "onnx: NULL program or path");
    return qat_export_all(m, in_rank, in_shape, &(qat_export_targets){.onnx = path, .config = config}, NULL);
}

qat_status qat_codegen_model(qat_model *m, int in_rank, const int64_t *in_shape, const char *dir, const char *name,
                             qat_codegen_info *info) {
    if (!m) return QAT_ERR_ARG;
    if (!dir) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "codegen: need a program, a directory and a save set");
    qat_export_report r;
    qat_status st = qat_export_all(m, in_rank, in_shape, &(qat_export_targets){.c_dir = dir, .c_name = name}, &r);
    if (st == QAT_OK && info) *info = r.c;
    return st;
}
