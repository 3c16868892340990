/* qat/data.h — data sets: train, validation and test splits read from
 * HDF5, NumPy .npy files, IDX files (MNIST and its kin) or the caller's
 * arrays; and the IDX reader and the MNIST set underneath.
 *
 * A data set is hostile input: every reader checks sizes, types and
 * shapes before it allocates or reads, and every value before it is
 * used (docs/data-format.md says what each format must look like, and
 * what is refused). Samples come out as floats holding the raw values
 * (a uint8 pixel p is (float)p): normalization belongs to the model
 * (qat/layers.h, qat_model_set_normalization), not to the data. */
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

/* ---- data sets ------------------------------------------------------------------- */

/* Element types of the arrays a data set holds. x may be U8, I8, F32 or
 * F64; class labels any integer type; float targets F32 or F64. Bool
 * arrays (numpy's '|b1', h5py's enum) read as U8. */
typedef enum {
    QAT_DT_U8, QAT_DT_I8, QAT_DT_U16, QAT_DT_I16, QAT_DT_U32, QAT_DT_I32, QAT_DT_U64, QAT_DT_I64,
    QAT_DT_F32, QAT_DT_F64, QAT_DT_COUNT
} qat_dtype;
QAT_API const char *qat_dtype_str(qat_dtype t); /* numpy's names: "uint8", "float32", ... */
QAT_API size_t qat_dtype_size(qat_dtype t);     /* bytes per element */

typedef enum { QAT_SPLIT_TRAIN, QAT_SPLIT_VAL, QAT_SPLIT_TEST, QAT_SPLIT_COUNT } qat_split;
QAT_API const char *qat_split_str(qat_split s); /* "train", "val", "test" */

/* What a split's y holds. */
typedef enum {
    QAT_TARGET_NONE,   /* no y: the target is x itself (an autoencoder) */
    QAT_TARGET_CLASS,  /* y [N]: integer class labels, each >= 0 */
    QAT_TARGET_VALUES  /* y [N, ...]: float targets (regression) */
} qat_target_kind;

#define QAT_DATA_MAX_RANK 4               /* dimensions of a sample (x without N) */
#define QAT_DATA_MAX_SAMPLES ((int64_t)1 << 31) /* samples of a split (indices are int32 in the trainer) */
#define QAT_DATA_MAX_SAMPLE ((int64_t)1 << 24)  /* elements of one sample of x or y */

typedef struct {
    int64_t n;                            /* samples (after rows skipped for non-finite values) */
    qat_dtype x_dtype;                    /* as stored */
    int x_rank;                           /* per-sample rank, 1..QAT_DATA_MAX_RANK */
    int64_t x_shape[QAT_DATA_MAX_RANK];   /* per sample, channels first ([C, H, W]; see channels_last) */
    int64_t x_numel;                      /* product of x_shape */
    qat_target_kind target;
    qat_dtype y_dtype;                    /* as stored (CLASS, VALUES) */
    int y_rank;                           /* VALUES: per-sample rank of y */
    int64_t y_shape[QAT_DATA_MAX_RANK];
    int64_t y_numel;                      /* VALUES: product of y_shape; CLASS: 1 */
    int64_t label_max, label_max_row;     /* CLASS: the largest label and the first row that holds it (the
                                           * row of the stored array, before skipping and carving: the row
                                           * to look at in the file); -1 otherwise */
    bool has_anomaly;                     /* an "anomaly" array [N] of 0/1 (test split of an autoencoder) */
    bool streaming;                       /* x is read from the file at each batch (over the memory cap) */
    int64_t skipped;                      /* rows skipped for NaN or infinity (allow_nonfinite) */
} qat_split_info;

typedef struct {
    /* Bytes the whole data set may hold in memory: x and float targets
     * (as stored) of the splits kept in memory, plus 4 to 9 bytes a
     * sample of labels, anomaly flags and row maps. An HDF5 split that
     * does not fit what is left (splits taken in the order train, val,
     * test) stays in the file and is read batch by batch (hyperslabs);
     * a read then holds at most one batch more. .npy and IDX sets must
     * fit whole. 0: the default, 1 GiB. */
    int64_t memory_cap;
    /* > 0 (and < 1): the val split is a random fraction of train
     * (round(fraction·N) samples, drawn with val_seed), and train keeps
     * the rest in its order. Refused when the set has a val split. */
    double val_fraction;
    uint64_t val_seed;
    /* Rows of x (or of float targets) holding NaN or infinity: an error
     * that names split and row (default), or skipped and counted. */
    bool allow_nonfinite;
    /* x arrays are [N, H, W, C] (numpy's image layout): samples are
     * transposed to [C, H, W] as they are read. Rank-3 samples only. */
    bool channels_last;
    /* The splits to read: a mask of 1u << qat_split (0: all of them). A
     * split left out is neither read nor checked: an evaluation reads the
     * split it measures alone. train must be read to carve val from it. */
    unsigned splits;
} qat_dataset_options;
QAT_API qat_dataset_options qat_dataset_defaults(void);

typedef struct qat_dataset qat_dataset; /* opaque */

/* Opens the data set at path, which is one of:
 *   an HDF5 file: groups "train", "test" and optionally "val", each with
 *     dataset "x" [N, ...] and optionally "y" ([N] integers: class
 *     labels; [N, ...] floats: targets) and "anomaly" ([N], 0/1);
 *   a directory of .npy files: train_x.npy, train_y.npy, test_x.npy,
 *     test_y.npy, and optionally val_x.npy, val_y.npy, test_anomaly.npy
 *     (version 1.0-3.0 headers, C order, little-endian, the dtypes
 *     above; a missing *_y.npy means no y);
 *   a directory of IDX files named as MNIST's (train-images-idx3-ubyte,
 *     train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 *     t10k-labels-idx1-ubyte; each gzipped (.gz) or not): EMNIST,
 *     Kuzushiji-MNIST, Fashion-MNIST and their kin.
 * It checks every split before returning: train and test present, x's
 * dtype and rank, N of x, y and anomaly equal, labels >= 0, the same
 * sample shape in every split, NaN and infinity (see the options), the
 * header of every file. Errors are one line naming the file, the split
 * and what is wrong ("test: x has 100 rows but y has 99"; "the file has
 * no group \"train\" (groups found: a, b)"). opt may be NULL (the
 * defaults). *out is freed with qat_dataset_free. */
QAT_API qat_status qat_dataset_open(qat_ctx *ctx, const char *path, const qat_dataset_options *opt,
                                    qat_dataset **out);

/* A split given as arrays in memory (the caller's own loader). x and y
 * have n rows; y NULL: no y; anomaly NULL: none. The arrays are copied
 * only where a conversion or a skipped row needs it: otherwise they are
 * borrowed and must outlive the data set. */
typedef struct {
    int64_t n;
    qat_dtype x_dtype;
    int x_rank;                          /* per sample */
    int64_t x_shape[QAT_DATA_MAX_RANK];
    const void *x;
    qat_dtype y_dtype;
    int y_rank;                          /* 0: class labels [n]; >= 1: float targets [n, y_shape] */
    int64_t y_shape[QAT_DATA_MAX_RANK];
    const void *y;
    const uint8_t *anomaly;
} qat_array_split;
/* train and test are required, val may be NULL. The same checks as
 * qat_dataset_open. */
QAT_API qat_status qat_dataset_from_arrays(qat_ctx *ctx, const qat_array_split *train, const qat_array_split *val,
                                           const qat_array_split *test, const qat_dataset_options *opt,
                                           qat_dataset **out);
QAT_API void qat_dataset_free(qat_dataset *d); /* accepts NULL */

/* A per-sample shape as text ("[1, 28, 28]") into buf; returns buf. */
QAT_API const char *qat_dims_str(int rank, const int64_t *shape, char *buf, size_t len);

/* "hdf5", "npy", "idx" or "memory". */
QAT_API const char *qat_dataset_format(const qat_dataset *d);
/* One split's description; NULL when the set has no such split. */
QAT_API const qat_split_info *qat_dataset_info(const qat_dataset *d, qat_split s);

/* Samples idx[0..n) of split s (each index in [0, info->n); repeats
 * allowed), into any of (each may be NULL):
 *   x        [n, x_numel] floats: the stored values converted exactly
 *            (uint8 p is (float)p; float64 rounded to nearest float32);
 *   labels   [n] class labels (CLASS splits);
 *   targets  [n, y_numel] floats (VALUES splits);
 *   anomaly  [n] 0/1 (splits that have it).
 * In-memory splits gather over the pool of the data set's context, in
 * chunks cut by n alone (the same bits for any thread count); streamed
 * splits read the rows from the file in index order and put them in
 * place. Errors (a read that fails: a file changed or truncated since it
 * was opened) name the file and the row. */
QAT_API qat_status qat_dataset_read(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, float *x,
                                    int32_t *labels, float *targets, uint8_t *anomaly);
/* The same samples' x in the stored type and layout ([n, x_numel]
 * elements of x_dtype, channels first): uint8 images for the integer
 * targets, which take raw pixels. */
QAT_API qat_status qat_dataset_read_raw(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, void *x);

/* Per-channel mean and standard deviation of split s's x, each value
 * divided by `divisor` first (255 for uint8 images, as torchvision's
 * ToTensor; 1 otherwise): channels are axis 0 of a rank-3 sample
 * ([C, H, W]), and the whole sample is one channel otherwise. Sums in
 * double over the first `limit` samples (0: all), population standard
 * deviation (divided by the count). mean and std have room for the
 * channels: x_shape[0] or 1. */
QAT_API qat_status qat_dataset_channel_stats(qat_dataset *d, qat_split s, int64_t limit, double divisor,
                                             double *mean, double *std);

/* Writes a .npy file (format version 1.0, C order, little-endian) of
 * `rank` dimensions holding data of type t, atomically (docs/saving.md):
 * the path holds the old file or the whole new one. */
QAT_API qat_status qat_npy_save(qat_ctx *ctx, const char *path, qat_dtype t, int rank, const int64_t *shape,
                                const void *data);
/* The header of such a file (magic, version, length, the dict padded
 * with spaces to a multiple of 64 bytes and ended by a newline) into buf:
 * its length, or 0 when it does not fit in len bytes or the arguments are
 * bad. The array's bytes follow it: for writers that stream rows. */
QAT_API size_t qat_npy_header(char *buf, size_t len, qat_dtype t, int rank, const int64_t *shape);

/* ---- augmentation ------------------------------------------------------------------
 * Random transformations of training samples, on raw values (before the
 * model's normalization), each sample drawing from its own generator
 * seeded by (seed, key): the key is the sample's position in the run
 * (step · batch + its place in the global batch), so the result depends
 * neither on the threads, nor on how a batch is shared among processes,
 * nor on a resume. Samples are [C, H, W] (rank 3) or [F] (rank 1). */
typedef struct {
    int crop_pad;   /* images: pad each side with P zeros, crop a random H x W window (0: off) */
    bool hflip;     /* images: mirror left-right with probability 1/2 */
    int time_shift; /* sequences: shift along axis 1 of [C, T, F] (along F for [F]) by a random
                       s in [-S, S], zeros entering (0: off) */
    float noise;    /* add noise·z to every element, in raw units (0: off); z has mean 0 and variance 1,
                       close to N(0, 1) (src/data/augment.c says how it is drawn) */
} qat_augment;
#define QAT_AUGMENT_MAX_PAD 64

QAT_API bool qat_augment_on(const qat_augment *a);
/* Can a run on samples of this shape (rank 1 or 3) apply a? QAT_ERR_ARG
 * with the reason (crop and flip need images, a pad or shift larger
 * than the axis, a noise that is not finite and >= 0). */
QAT_API qat_status qat_augment_check(qat_ctx *ctx, const qat_augment *a, int rank, const int64_t *shape);
/* Applies a to n samples x [n, numel] in place, sample i with key
 * first_key + i, over the context's pool (one task per 16 samples).
 * scratch holds qat_pool_threads(pool) · numel floats. */
QAT_API void qat_augment_batch(qat_ctx *ctx, const qat_augment *a, uint64_t seed, int64_t first_key, int64_t n,
                               int rank, const int64_t *shape, float *x, float *scratch);

/* Fisher-Yates shuffle of perm[0..n) with the caller's RNG. */
QAT_API void qat_shuffle(int32_t *perm, int64_t n, qat_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
