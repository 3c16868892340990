/* --data and its options (data_arg.h). */
#include "data_arg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "qat/train.h"

int data_arg_parse(data_arg *d, const char *prog, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--data")) return (v = cli_value(prog, argc, argv, i)) ? (d->path = v, 1) : -1;
    if (!strcmp(a, "--val")) {
        if (!(v = cli_value(prog, argc, argv, i))) return -1;
        if (!cli_float(prog, a, v, 1e-6, 0.999, &d->val)) return -1;
        return 1;
    }
    if (!strcmp(a, "--val-seed")) {
        if (!(v = cli_value(prog, argc, argv, i)) || !cli_int(prog, a, v, 0, 2147483647L, &d->val_seed)) return -1;
        d->val_seed_set = true;
        return 1;
    }
    if (!strcmp(a, "--memory-cap"))
        return (v = cli_value(prog, argc, argv, i)) && cli_int(prog, a, v, 1, 1L << 20, &d->memory_cap_mib) ? 1 : -1;
    if (!strcmp(a, "--channels-last")) return d->channels_last = true, 1;
    if (!strcmp(a, "--allow-nonfinite")) return d->allow_nonfinite = true, 1;
    if (!strcmp(a, "--no-units-check")) return d->no_units_check = true, 1;
    return 0;
}

qat_status data_arg_open(const data_arg *d, const char *prog, long seed, unsigned splits, qat_ctx *ctx,
                         qat_dataset **out) {
    qat_dataset_options opt = qat_dataset_defaults();
    opt.val_fraction = d->val;
    opt.val_seed = (uint64_t)(d->val_seed_set ? d->val_seed : seed);
    opt.channels_last = d->channels_last;
    opt.allow_nonfinite = d->allow_nonfinite;
    opt.splits = splits;
    if (d->memory_cap_mib) opt.memory_cap = (int64_t)d->memory_cap_mib << 20;
    struct stat sb;
    if (stat(d->path, &sb) != 0) { /* the OS's reason: missing and unreadable need different fixes */
        int err = errno;
        bool mnist = strstr(d->path, "mnist") || strstr(d->path, "MNIST"); /* the one data set a script fetches */
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot read the data set: %s (an HDF5 file, a directory of .npy or "
                            "IDX files: docs/data-format.md%s)", d->path, strerror(err),
                            mnist ? "; MNIST: scripts/fetch-mnist.sh DIR fetches it, and with QAT_MNIST_DIR naming a "
                                    "local copy it copies from there"
                                  : "");
    }
    qat_status st = qat_dataset_open(ctx, d->path, &opt, out);
    if (st != QAT_OK) return st;
    /* one line: the format, the samples (of the first split read), and each split's size */
    static const char *const targets[] = {"no y", "class labels", "float targets"};
    const qat_split_info *first = NULL;
    char shape[96], counts[160] = "";
    size_t at = 0;
    static const qat_split order[QAT_SPLIT_COUNT] = {QAT_SPLIT_TRAIN, QAT_SPLIT_VAL, QAT_SPLIT_TEST};
    for (int k = 0; k < QAT_SPLIT_COUNT; k++) {
        const qat_split_info *i = qat_dataset_info(*out, order[k]);
        if (!i) continue;
        if (!first) first = i;
        at += (size_t)snprintf(counts + at, sizeof counts - at, "%s%s %lld%s%s", at ? ", " : "", qat_split_str(order[k]),
                               (long long)i->n, i->has_anomaly ? " (with anomaly labels)" : "",
                               i->streaming ? " (streamed from the file)" : "");
        if (at >= sizeof counts) at = sizeof counts - 1;
    }
    if (first)
        fprintf(stderr, "%s: data %s (%s): %s samples of %s, %s; %s\n", prog, d->path, qat_dataset_format(*out),
                qat_dtype_str(first->x_dtype), qat_dims_str(first->x_rank, first->x_shape, shape, sizeof shape),
                targets[first->target], counts);
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat_split_info *i = qat_dataset_info(*out, (qat_split)s);
        if (i && i->skipped)
            fprintf(stderr, "%s: %s: skipped %lld row%s holding NaN or infinity (--allow-nonfinite)\n", prog,
                    qat_split_str((qat_split)s), (long long)i->skipped, i->skipped == 1 ? "" : "s");
    }
    return QAT_OK;
}

qat_status data_arg_check_units(const data_arg *d, qat_dataset *ds, qat_split s, int64_t limit,
                                const qat_normalization *nm, qat_ctx *ctx) {
    if (d->no_units_check) return QAT_OK;
    bool refused;
    qat_status st = qat_data_check_units(ctx, ds, s, limit > 0 && limit < QAT_UNITS_SAMPLES ? limit : QAT_UNITS_SAMPLES,
                                         nm, &refused);
    if (!refused) return st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", qat_ctx_error(ctx));
    qat_ctx_clear_error(ctx); /* the first error stays: this one again, with the way on */
    return qat_ctx_fail(ctx, st, "%s%s", msg, DATA_ARG_UNITS_HINT);
}
