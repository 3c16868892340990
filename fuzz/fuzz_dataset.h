/* Shared by the data-set fuzz targets: what a data set that opened must
 * satisfy, checked by reading it (a violation aborts: libFuzzer keeps the
 * input). Reads are bounded (the first 64 samples and the last) so that
 * a file declaring millions of samples still fuzzes at speed. */
#ifndef QAT_FUZZ_DATASET_H
#define QAT_FUZZ_DATASET_H

#include <math.h>
#include <stdlib.h>

#include "qat/data.h"

#define FUZZ_READ 65 /* samples read per split (at most) */

static inline void fuzz_exercise(qat_ctx *ctx, qat_dataset *d) {
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat_split_info *in = qat_dataset_info(d, (qat_split)s);
        if (!in) continue;
        if (in->n < 1 || in->x_numel < 1 || in->x_numel > QAT_DATA_MAX_SAMPLE || in->x_rank < 1 ||
            in->x_rank > QAT_DATA_MAX_RANK || in->n > QAT_DATA_MAX_SAMPLES)
            abort();
        int64_t m = in->n < FUZZ_READ ? in->n : FUZZ_READ;
        int32_t idx[FUZZ_READ], labels[FUZZ_READ];
        uint8_t anomaly[FUZZ_READ];
        for (int64_t i = 0; i < m; i++) idx[i] = (int32_t)(i + 1 < m ? (i * 7) % in->n : in->n - 1);
        float *x = malloc((size_t)(m * in->x_numel) * sizeof *x);
        void *raw = malloc((size_t)(m * in->x_numel) * qat_dtype_size(in->x_dtype));
        float *t = in->target == QAT_TARGET_VALUES ? malloc((size_t)(m * in->y_numel) * sizeof *t) : NULL;
        if (!x || !raw || (in->target == QAT_TARGET_VALUES && !t)) abort(); /* bounded: 65 · 2^24 · 8 at most */
        qat_status st = qat_dataset_read(d, (qat_split)s, idx, m, x, in->target == QAT_TARGET_CLASS ? labels : NULL, t,
                                         in->has_anomaly ? anomaly : NULL);
        if (st == QAT_OK) {
            /* what opened is clean: finite values, labels in range, flags 0/1 */
            for (int64_t i = 0; i < m * in->x_numel; i++)
                if (!isfinite(x[i])) abort();
            for (int64_t i = 0; t && i < m * in->y_numel; i++)
                if (!isfinite(t[i])) abort();
            for (int64_t i = 0; in->target == QAT_TARGET_CLASS && i < m; i++)
                if (labels[i] < 0 || labels[i] > in->label_max) abort();
            for (int64_t i = 0; in->has_anomaly && i < m; i++)
                if (anomaly[i] > 1) abort();
        } else if (!qat_ctx_error(ctx)[0]) {
            abort(); /* a failure without a message breaks the library's contract */
        }
        qat_ctx_clear_error(ctx);
        if (qat_dataset_read_raw(d, (qat_split)s, idx, m, raw) != QAT_OK && !qat_ctx_error(ctx)[0]) abort();
        qat_ctx_clear_error(ctx);
        int64_t channels = in->x_rank == 3 ? in->x_shape[0] : 1;
        double *mean = malloc((size_t)channels * sizeof *mean), *sd = malloc((size_t)channels * sizeof *sd);
        if (!mean || !sd) abort();
        if (qat_dataset_channel_stats(d, (qat_split)s, FUZZ_READ, 255.0, mean, sd) == QAT_OK)
            for (int64_t c = 0; c < channels; c++)
                if (!(sd[c] >= 0)) abort();
        qat_ctx_clear_error(ctx);
        free(mean), free(sd), free(x), free(raw), free(t);
    }
}

/* Opens path with the defaults, then streamed (a small cap), carving val,
 * channels last and skipping non-finite rows; each opened set is read. */
static inline void fuzz_open_both(const char *path, int64_t small_cap) {
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        if (!ctx) return;
        qat_dataset_options o = qat_dataset_defaults();
        if (k) {
            o.memory_cap = small_cap;
            o.val_fraction = 0.25;
            o.val_seed = 3;
            o.allow_nonfinite = true;
            o.channels_last = true;
        }
        qat_dataset *d = NULL;
        if (qat_dataset_open(ctx, path, &o, &d) == QAT_OK) {
            if (!d) abort();
            fuzz_exercise(ctx, d);
        } else if (d || !qat_ctx_error(ctx)[0]) {
            abort();
        }
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
}

#endif
