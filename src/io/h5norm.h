/* The input normalization in an HDF5 group, shared by the training
 * checkpoint (/architecture/normalization) and the quantized model file
 * (/normalization): attributes channels (int64), divisor (float32),
 * raw_uint8 (int64 0/1), datasets mean and std (float32 [channels]).
 * Shared with: src/export
 */
#ifndef QAT_IO_H5NORM_H
#define QAT_IO_H5NORM_H

#include "h5util.h"

/* Writes group "normalization" under loc. */
void qat__h5w_norm(qat__h5w *w, hid_t loc, const qat_normalization *n);

/* Reads group "normalization" of loc, hostile input: channels in
 * 1..QAT_NORM_MAX_CHANNELS and raw_uint8 0 or 1 before anything else,
 * mean and std exactly [channels], then qat_normalization_check against
 * the per-sample input shape (rank 0: not known). Every message names
 * `where` (the group's path) and the field. false + error on r; *out
 * then has channels 0. */
bool qat__h5r_norm(qat__h5r *r, hid_t loc, const char *where, int rank, const int64_t *shape, qat_normalization *out);

#endif
