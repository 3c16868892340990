/* ckpt_cmp A B: do two training checkpoints hold the same model state, bit
 * for bit? Parameters, buffers (BatchNorm's running statistics), LSQ
 * scales, every activation quantizer's observer and quantization
 * parameters, every weight quantizer's parameters, the mode flags and the
 * dropout RNG. (The HDF5 files themselves are not byte-identical from run
 * to run: they carry times.) Used by the data-parallel tests
 * (tests/mpi_train.sh) and to check thread-count independence by hand.
 * Exit 0: identical; 1: they differ (what differs is printed); 2: error. */
#include <stdio.h>
#include <string.h>

#include "internals.h"
#include "qat/io.h"

static int diffs;

static void same(const char *what, const void *a, const void *b, size_t bytes) {
    if (bytes && memcmp(a, b, bytes)) {
        size_t i = 0;
        while (((const unsigned char *)a)[i] == ((const unsigned char *)b)[i]) i++;
        printf("ckpt_cmp: %s differ (first at byte %zu of %zu)\n", what, i, bytes);
        diffs++;
    }
}

static void same_qtype(const char *what, const qat_qtype *a, const qat_qtype *b) {
    if (a->nparams != b->nparams) {
        printf("ckpt_cmp: %s: %lld and %lld parameters\n", what, (long long)a->nparams, (long long)b->nparams);
        diffs++;
        return;
    }
    same(what, a->scale, b->scale, (size_t)a->nparams * sizeof *a->scale);
    same(what, a->zero_point, b->zero_point, (size_t)a->nparams * sizeof *a->zero_point);
}

/* The observer's numbers (the struct may have padding: field by field). */
static void same_observer(const char *name, const qat_observer *a, const qat_observer *b) {
    char w[96];
    float fa[5] = {a->min, a->max, a->state, a->acc_min, a->acc_max}, fb[5] = {b->min, b->max, b->state, b->acc_min,
                                                                               b->acc_max};
    snprintf(w, sizeof w, "%s observer", name);
    same(w, fa, fb, sizeof fa);
    same(w, a->win_min, b->win_min, sizeof a->win_min);
    same(w, a->win_max, b->win_max, sizeof a->win_max);
    same(w, &a->updates, &b->updates, sizeof a->updates);
}

int main(int argc, char **argv) {
    if (argc != 3 || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr, "usage: ckpt_cmp A.h5 B.h5  (exit 0: same model state, 1: differ)\n");
        return argc == 2 ? 0 : 2;
    }
    qat_ctx *ca = qat_ctx_new(), *cb = qat_ctx_new();
    qat_model *a = NULL, *b = NULL;
    char cfa[4096], cfb[4096];
    if (!ca || !cb || qat_checkpoint_model(ca, argv[1], &a, cfa, sizeof cfa) != QAT_OK ||
        qat_checkpoint_model(cb, argv[2], &b, cfb, sizeof cfb) != QAT_OK) {
        fprintf(stderr, "ckpt_cmp: %s\n", ca && qat_ctx_status(ca) ? qat_ctx_error(ca) : cb ? qat_ctx_error(cb) : "no memory");
        qat_ctx_free(ca), qat_ctx_free(cb);
        return 2;
    }
    int64_t sa, ea, sb, eb;
    bool pa, pb;
    if (qat_checkpoint_info(ca, argv[1], &sa, &ea, &pa) != QAT_OK || qat_checkpoint_info(cb, argv[2], &sb, &eb, &pb) != QAT_OK)
        return fprintf(stderr, "ckpt_cmp: %s\n", qat_ctx_error(ca)), 2;
    if (sa != sb || ea != eb) printf("ckpt_cmp: step/epoch %lld/%lld and %lld/%lld\n", (long long)sa, (long long)ea,
                                     (long long)sb, (long long)eb), diffs++;
    if (a->n_layers != b->n_layers || a->n_params != b->n_params || a->n_buffers != b->n_buffers ||
        a->n_qparams != b->n_qparams || a->prepared != b->prepared) {
        printf("ckpt_cmp: different models\n");
        return 1;
    }
    same("parameters", a->params, b->params, (size_t)a->n_params * sizeof(float));
    same("buffers (BatchNorm running statistics)", a->buffers, b->buffers, (size_t)a->n_buffers * sizeof(float));
    same("LSQ scales", a->qparams, b->qparams, (size_t)a->n_qparams * sizeof(float));
    same("dropout RNG", &a->rng, &b->rng, sizeof a->rng);
    bool fa[3] = {a->fake_quant_on, a->observers_frozen, a->bn_frozen}, fb[3] = {b->fake_quant_on, b->observers_frozen,
                                                                                  b->bn_frozen};
    same("mode flags", fa, fb, sizeof fa);
    for (int i = 0; i < a->n_layers; i++) {
        const qat__layer *la = &a->layers[i], *lb = &b->layers[i];
        char w[96];
        if (!la->aq != !lb->aq || !la->wq != !lb->wq) {
            printf("ckpt_cmp: layer %s: quantizers differ\n", la->name);
            diffs++;
            continue;
        }
        if (la->aq) {
            same_observer(la->name, &la->aq->obs, &lb->aq->obs);
            snprintf(w, sizeof w, "%s activation qparams", la->name);
            same_qtype(w, &la->aq->q, &lb->aq->q);
        }
        if (la->wq) {
            snprintf(w, sizeof w, "%s weight qparams", la->name);
            same_qtype(w, la->wq, lb->wq);
        }
    }
    if (!diffs) printf("ckpt_cmp: same model state (step %lld)\n", (long long)sa);
    qat_ctx_free(ca), qat_ctx_free(cb);
    return diffs ? 1 : 0;
}
