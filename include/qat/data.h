/* qat/data.h — IDX files (gzipped or plain) and the MNIST data set.
 *
 * Images stay uint8 in memory (47 MB for the training set) and are
 * converted to normalised floats one batch at a time. */
#ifndef QAT_DATA_H
#define QAT_DATA_H

#include "qat/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An IDX file of unsigned bytes (type code 0x08), 1 to 4 dimensions. */
typedef struct {
    int ndim;
    int64_t dims[4];
    int64_t size;  /* product of dims */
    uint8_t *data; /* malloc'd; qat_idx_free releases it */
} qat_idx;

/* The most payload qat_idx_read accepts (4 GiB; EMNIST's largest file is
 * 0.55 GB), and each dimension is at most 2^28. */
#define QAT_IDX_MAX_BYTES ((int64_t)1 << 32)

/* Reads path: through zlib's inflate when it starts with the gzip magic
 * (one or more gzip members), as it is otherwise. Checks the magic number,
 * the type code, the dimensions (within the limits above) and that the
 * payload has exactly the bytes they promise, with nothing after it: no
 * trailing data, no bytes after the last gzip member. Safe on hostile
 * files: memory grows with the data actually read (at most about twice
 * that, plus 1 MiB), never to a size the header merely claims. Errors name
 * the file and the fault (and the system's reason when it cannot be
 * opened or read). */
QAT_API qat_status qat_idx_read(qat_ctx *ctx, const char *path, qat_idx *out);
QAT_API void qat_idx_free(qat_idx *idx); /* accepts NULL */

typedef struct {
    int64_t n;        /* samples */
    int rows, cols;   /* 28 x 28 */
    uint8_t *images;  /* [n, rows, cols] */
    uint8_t *labels;  /* [n], each 0..9 */
} qat_mnist;

#define QAT_MNIST_MEAN 0.1307f /* the usual normalisation constants */
#define QAT_MNIST_STD 0.3081f

/* Loads "train" or "test" (train-*-idx?-ubyte[.gz], t10k-*) from dir,
 * preferring the .gz files. Checks that images are [n, rows, cols], labels
 * [n], the counts agree and every label is a digit. */
QAT_API qat_status qat_mnist_load(qat_ctx *ctx, const char *dir, const char *split, qat_mnist *out);
QAT_API void qat_mnist_free(qat_mnist *d); /* accepts NULL */

/* Gathers samples idx[0..n) into x [n, rows*cols] as (p/255 - mean)/std
 * and their labels into y. */
QAT_API void qat_mnist_batch(const qat_mnist *d, const int32_t *idx, int64_t n, float *x, int32_t *y);

/* Fisher-Yates shuffle of perm[0..n) with the caller's RNG. */
QAT_API void qat_shuffle(int32_t *perm, int64_t n, qat_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
