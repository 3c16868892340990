/* qat_ort_compare: qat's integer engine against onnxruntime on the MNIST
 * test set, sample by sample — the bar of docs/onnx.md.
 *
 *   qat_ort_compare MODEL.qat.h5 MNIST_DIR ORT_LOGITS.f32 ORT_PRED QAT_PRED [MIN_AGREE MAX_GAP [int|fake]]
 *
 * ORT_LOGITS, ORT_PRED: what tests/onnx/ort_run.js wrote for the ONNX file
 * exported from the same checkpoint; QAT_PRED: `qat eval --predictions`
 * of MODEL (checked against this program's own run of the int engine).
 * The raw output integers of onnxruntime are recovered from its logits:
 * a DequantizeLinear output is s·(q - zp) in float32, and rint(l/s) + zp
 * gives q back exactly for |q - zp| <= 255 (checked: a logit that is not
 * within 1e-3 of such a value is counted as "not an integer").
 *
 * The fake-quantized engine (the model QAT trained, one rounding per
 * requantization point) runs too: its agreement with onnxruntime shows
 * where the int engine's gemmlowp double rounding is the difference.
 *
 * Prints the figures and one JSON line; exits 1 when prediction agreement
 * is below MIN_AGREE (default 0.999) or the accuracies differ by more
 * than MAX_GAP points (default 0.05), against the int engine (default) or
 * the fake-quantized one (a briefly trained deep model, whose int engine
 * drifts from the QAT model it came from: docs/onnx.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/layers.h"

static int read_labels(const char *path, int32_t *v, int64_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int64_t i = 0;
    while (i < n && fscanf(f, "%d", &v[i]) == 1) i++;
    fclose(f);
    return i == n ? 0 : -1;
}

static int argmax_i32(const int32_t *v, int64_t K) {
    int best = 0;
    for (int k = 1; k < K; k++) best = v[k] > v[best] ? k : best;
    return best;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s MODEL.qat.h5 MNIST_DIR ORT_LOGITS.f32 ORT_PRED QAT_PRED [MIN_AGREE MAX_GAP [int|fake]]\n",
                argv[0]);
        return 2;
    }
    double min_agree = argc >= 8 ? atof(argv[6]) : 0.999, max_gap = argc >= 8 ? atof(argv[7]) : 0.05;
    bool vs_fake = argc == 9 && !strcmp(argv[8], "fake");
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    qat_mnist d = {0};
    int rc = 2;
    if (qat_qmodel_load(ctx, argv[1], &q) != QAT_OK || qat_mnist_load(ctx, argv[2], "test", &d) != QAT_OK) {
        fprintf(stderr, "qat_ort_compare: %s\n", qat_ctx_error(ctx));
        qat_ctx_free(ctx);
        return 2;
    }
    const qat_aparams *o = &q.tensors[q.output].q;
    int64_t n = d.n, K = qat_qtensor_numel(&q.tensors[q.output]), per = d.rows * d.cols, B = 500;
    if (K > 64) {
        fprintf(stderr, "qat_ort_compare: %lld logits: at most 64\n", (long long)K);
        qat_mnist_free(&d);
        qat_ctx_free(ctx);
        return 2;
    }
    float *x = malloc((size_t)(B * per) * sizeof *x), *lo = malloc((size_t)(n * K) * sizeof *lo);
    int32_t *qi = malloc((size_t)(n * K) * sizeof *qi), *idx = malloc((size_t)B * sizeof *idx);
    int32_t *qf = malloc((size_t)(n * K) * sizeof *qf);
    int32_t *y = malloc((size_t)B * sizeof *y), *op = malloc((size_t)n * sizeof *op), *qp = malloc((size_t)n * sizeof *qp);
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, (int)B), *fe = qat_engine_new(ctx, &q, QAT_ENGINE_FAKE, (int)B);
    FILE *f = fopen(argv[3], "rb");
    if (!x || !lo || !qi || !qf || !idx || !y || !op || !qp || !e || !fe || !f || fread(lo, sizeof *lo, (size_t)(n * K), f) != (size_t)(n * K) ||
        read_labels(argv[4], op, n) || read_labels(argv[5], qp, n)) {
        fprintf(stderr, "qat_ort_compare: cannot read the inputs (%s)\n", e ? "files" : qat_ctx_error(ctx));
        goto done;
    }
    for (int64_t s = 0; s < n; s += B) {
        int64_t b = n - s < B ? n - s : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(s + i);
        /* raw pixels: the model normalizes them itself (its program carries the normalization) */
        int64_t px = (int64_t)d.rows * d.cols;
        for (int64_t i = 0; i < b * px; i++) x[i] = (float)d.images[s * px + i];
        if (qat_engine_run(e, x, b, NULL, qi + s * K) != QAT_OK || qat_engine_run(fe, x, b, NULL, qf + s * K) != QAT_OK) {
            fprintf(stderr, "qat_ort_compare: %s\n", qat_ctx_error(ctx));
            goto done;
        }
    }
    int64_t agree = 0, qc = 0, oc = 0, eval_same = 0, ort_pred_same = 0, same = 0, rows_same = 0, not_int = 0;
    int64_t fagree = 0, fsame = 0, fc = 0, fqsame = 0; /* the fake engine against onnxruntime, and against int */
    int64_t hist[4] = {0}; /* |diff| = 1, 2, 3, more */
    int maxd = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t oi[64];
        bool row = true;
        for (int64_t k = 0; k < K; k++) {
            double r = (double)lo[i * K + k] / (double)o->scale;
            not_int += fabs(r - nearbyint(r)) > 1e-3;
            oi[k] = (int32_t)nearbyint(r) + o->zero_point;
            int dd = abs(oi[k] - qi[i * K + k]);
            fsame += oi[k] == qf[i * K + k], fqsame += qi[i * K + k] == qf[i * K + k];
            same += dd == 0, row &= dd == 0;
            if (dd) hist[dd > 3 ? 3 : dd - 1]++;
            maxd = dd > maxd ? dd : maxd;
        }
        rows_same += row;
        int qa = argmax_i32(qi + i * K, K), fa = argmax_i32(qf + i * K, K);
        fagree += fa == op[i], fc += fa == d.labels[i];
        eval_same += qa == qp[i];
        ort_pred_same += argmax_i32(oi, K) == op[i];
        agree += qp[i] == op[i];
        qc += qp[i] == d.labels[i];
        oc += op[i] == d.labels[i];
    }
    /* the input: qat quantizes x·(1/s), QuantizeLinear computes x/s; MNIST has 256 distinct inputs */
    const qat_aparams *ia = &q.tensors[q.input].q;
    int input_diff = 0;
    for (int v = 0; v < 256; v++) {
        float xv, raw = (float)v;
        qat_normalize_samples(q.norm, 1, &raw, &xv, 1);
        input_diff += nearbyintf(xv * (1.0f / ia->scale)) != nearbyintf(xv / ia->scale);
    }
    double agreement = (double)agree / (double)n, acc_q = 100.0 * (double)qc / (double)n, acc_o = 100.0 * (double)oc / (double)n;
    double int_agree = (double)same / (double)(n * K), gap = fabs(acc_q - acc_o);
    printf("predictions: qat int engine and onnxruntime agree on %lld of %lld (%.2f %%)\n", (long long)agree, (long long)n,
           100 * agreement);
    printf("accuracy: qat int engine %.2f %%, onnxruntime %.2f %% (gap %.2f points)\n", acc_q, acc_o, gap);
    printf("raw output integers: %.4f %% of %lld equal (%lld samples with all %lld equal); |diff| 1: %lld, 2: %lld, "
           "3: %lld, more: %lld; max %d\n", 100 * int_agree, (long long)(n * K), (long long)rows_same, (long long)K,
           (long long)hist[0], (long long)hist[1], (long long)hist[2], (long long)hist[3], maxd);
    printf("input integers: x·(1/s) and x/s round apart on %d of the 256 pixel values\n", input_diff);
    printf("fake-quantized engine (the QAT model): predictions = onnxruntime on %.2f %%, accuracy %.2f %%; raw output "
           "integers = onnxruntime %.4f %%, = int engine %.4f %%\n", 100.0 * (double)fagree / (double)n,
           100.0 * (double)fc / (double)n, 100.0 * (double)fsame / (double)(n * K), 100.0 * (double)fqsame / (double)(n * K));
    printf("{\"samples\": %lld, \"agreement\": %.6f, \"qat_accuracy\": %.4f, \"ort_accuracy\": %.4f, \"accuracy_gap\": %.4f, "
           "\"int_agreement\": %.6f, \"rows_all_equal\": %lld, \"diff1\": %lld, \"diff2\": %lld, \"diff3\": %lld, "
           "\"diff_more\": %lld, \"max_diff\": %d, \"logits_not_integer\": %lld, \"fake_ort_agreement\": %.6f, "
           "\"fake_accuracy\": %.4f, \"fake_ort_int_agreement\": %.6f, \"fake_int_int_agreement\": %.6f, \"input_values_differing\": %d}\n",
           (long long)n, agreement, acc_q, acc_o, gap, int_agree, (long long)rows_same, (long long)hist[0],
           (long long)hist[1], (long long)hist[2], (long long)hist[3], maxd, (long long)not_int,
           (double)fagree / (double)n, 100.0 * (double)fc / (double)n, (double)fsame / (double)(n * K),
           (double)fqsame / (double)(n * K), input_diff);
    rc = 0;
    if (eval_same != n) fprintf(stderr, "FAIL: %s differs from this run of the int engine on %lld samples\n", argv[5], (long long)(n - eval_same)), rc = 1;
    if (ort_pred_same != n) fprintf(stderr, "FAIL: %s is not the argmax of %s\n", argv[4], argv[3]), rc = 1;
    if (not_int) fprintf(stderr, "FAIL: %lld onnxruntime logits are not an integer times the output scale\n", (long long)not_int), rc = 1;
    double bar_agree = vs_fake ? (double)fagree / (double)n : agreement;
    double bar_gap = vs_fake ? fabs(100.0 * (double)fc / (double)n - acc_o) : gap;
    const char *ref = vs_fake ? "the fake-quantized engine" : "the int engine";
    if (bar_agree < min_agree)
        fprintf(stderr, "FAIL: prediction agreement with %s %.4f below %.4f\n", ref, bar_agree, min_agree), rc = 1;
    if (bar_gap > max_gap) fprintf(stderr, "FAIL: accuracy gap to %s %.2f points above %.2f\n", ref, bar_gap, max_gap), rc = 1;
done:
    if (f) fclose(f);
    qat_engine_free(e);
    qat_engine_free(fe);
    free(qf);
    free(x), free(lo), free(qi), free(idx), free(y), free(op), free(qp);
    qat_mnist_free(&d);
    qat_ctx_free(ctx);
    return rc;
}
