/* --data and its options (data_arg.h). */
#include "data_arg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

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
    return 0;
}

const char *data_shape_str(int rank, const int64_t *shape, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < rank && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

qat_status data_arg_open(const data_arg *d, const char *prog, long seed, qat_ctx *ctx, qat_dataset **out) {
    qat_dataset_options opt = qat_dataset_defaults();
    opt.val_fraction = d->val;
    opt.val_seed = (uint64_t)(d->val_seed_set ? d->val_seed : seed);
    opt.channels_last = d->channels_last;
    opt.allow_nonfinite = d->allow_nonfinite;
    if (d->memory_cap_mib) opt.memory_cap = (int64_t)d->memory_cap_mib << 20;
    struct stat sb;
    if (stat(d->path, &sb) != 0) /* the OS's reason: missing and unreadable need different fixes */
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot read the data set: %s (an HDF5 file, a directory of .npy or "
                            "IDX files; MNIST: scripts/fetch-mnist.sh DIR fetches it, and with QAT_MNIST_DIR naming a "
                            "local copy it copies from there)", d->path, strerror(errno));
    qat_status st = qat_dataset_open(ctx, d->path, &opt, out);
    if (st != QAT_OK) return st;
    const qat_split_info *tr = qat_dataset_info(*out, QAT_SPLIT_TRAIN), *te = qat_dataset_info(*out, QAT_SPLIT_TEST),
                         *va = qat_dataset_info(*out, QAT_SPLIT_VAL);
    static const char *const targets[] = {"no y", "class labels", "float targets"};
    char shape[96], val[48] = "";
    if (va) snprintf(val, sizeof val, ", val %lld", (long long)va->n);
    fprintf(stderr, "%s: data %s (%s): %s samples of %s, %s; train %lld%s, test %lld%s%s\n", prog, d->path,
            qat_dataset_format(*out), qat_dtype_str(tr->x_dtype),
            data_shape_str(tr->x_rank, tr->x_shape, shape, sizeof shape), targets[tr->target], (long long)tr->n, val,
            (long long)te->n, te->has_anomaly ? " (with anomaly labels)" : "",
            tr->streaming ? "; train streams from the file" : "");
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat_split_info *i = qat_dataset_info(*out, (qat_split)s);
        if (i && i->skipped)
            fprintf(stderr, "%s: %s: skipped %lld rows holding NaN or infinity (--allow-nonfinite)\n", prog,
                    qat_split_str((qat_split)s), (long long)i->skipped);
    }
    return QAT_OK;
}
