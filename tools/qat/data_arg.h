/* --data and the options that shape how a data set is read, shared by
 * the commands that read one (train, eval, analyze). */
#ifndef QAT_TOOL_DATA_ARG_H
#define QAT_TOOL_DATA_ARG_H

#include <stdbool.h>

#include "qat/data.h"

typedef struct {
    const char *path;       /* an HDF5 file, a .npy directory or an IDX directory (default data/mnist) */
    double val;             /* --val FRACTION: carve a val split from train */
    long val_seed;          /* --val-seed (default: the run's --seed) */
    bool val_seed_set;
    bool channels_last;     /* --channels-last */
    bool allow_nonfinite;   /* --allow-nonfinite */
    bool no_units_check;    /* --no-units-check */
    long memory_cap_mib;    /* --memory-cap MIB (0: the default) */
} data_arg;

/* The data options' lines of a command's --help. */
#define DATA_ARG_USAGE                                                                                         \
    "  --data PATH                 the data set (default data/mnist): an HDF5 file, a directory of .npy\n"       \
    "                              files or a directory of IDX files (docs/data-format.md)\n"                   \
    "  --val FRACTION              carve a validation split of this fraction from train (seeded)\n"             \
    "  --val-seed S                the seed of that draw (train: its --seed by default; eval: the\n"           \
    "                              seed the model's training recorded, so its val split)\n"                     \
    "  --channels-last             x is [N, H, W, C] (numpy's image layout): read as [C, H, W]\n"               \
    "  --allow-nonfinite           skip rows holding NaN or infinity (default: refuse the data set)\n"          \
    "  --no-units-check            take data whose spread or mean is far from what the model's\n"          \
    "                              normalization was made for (default: refuse it; docs/tool.md)\n"          \
    "  --memory-cap MIB            the set is held in memory up to this size; an HDF5 split\n"             \
    "                              beyond it is read from the file batch by batch (default 1024)\n"

/* Consumes argv[*i] (and its value) when it is a data option: 1, 0 when
 * it is not one, -1 after a bad value (reported). */
int data_arg_parse(data_arg *d, const char *prog, int argc, char **argv, int *i);
/* Opens d->path with d's options (seed: the default val seed; splits: the
 * splits to read, a mask of 1u << qat_split, 0 for all) and says on
 * stderr what it found. QAT_OK, or the context's error. */
qat_status data_arg_open(const data_arg *d, const char *prog, long seed, unsigned splits, qat_ctx *ctx,
                         qat_dataset **out);
/* Unless --no-units-check: split s of ds against the model's normalization
 * nm (qat_data_check_units over its first samples: limit, at most
 * QAT_UNITS_SAMPLES; 0 for that many): QAT_OK, or the error on ctx, a
 * refusal's message ending with the option. */
qat_status data_arg_check_units(const data_arg *d, qat_dataset *ds, qat_split s, int64_t limit,
                                const qat_normalization *nm, qat_ctx *ctx);
/* The end of that message, for a check the trainer made. */
#define DATA_ARG_UNITS_HINT "; --no-units-check takes the data as they are"

#endif
