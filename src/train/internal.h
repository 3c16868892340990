/* Shared by the trainer's files, not part of the API. */
#ifndef QAT_TRAIN_INTERNAL_H
#define QAT_TRAIN_INTERNAL_H

/* Per-channel statistics of channels of equal size (qat_dataset_channel_stats)
 * pooled into channel 0: the mean of the means and sqrt(E[x²] - mean²), as
 * one channel's would be. */
void qat__pool_channel_stats(int channels, double *mean, double *sd);

#endif
