/* qat summary, analyze and plot: looking inside a model, and at a
 * training run (the library side is qat/analyze.h). */
#ifndef QAT_TOOL_TOOLS_H
#define QAT_TOOL_TOOLS_H

#include <stdint.h>

#include "qat/data.h"
#include "qat/layers.h"
#include "qat/train.h"

int cmd_summary(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_plot(int argc, char **argv);

/* The per-sample input of a model, into shape[3]; returns the rank. Its
 * declared shape, or for a checkpoint that declares none (version 2, a
 * built-in model): MNIST's [1, 28, 28] when the first layer is a
 * convolution, its 784 pixels otherwise — export's rule. */
int tools_input_shape(const qat_model *m, int64_t *shape);
/* The model's output values per sample (at tools_input_shape); -1 if its
 * shapes cannot be worked out (the model's context has the message). */
int64_t tools_output_numel(const qat_model *m);
/* Does split s of d fit m (qat_data_check at tools_input_shape and
 * tools_output_numel; kind NULL: the inputs and any class labels only)?
 * The message on m's context. */
qat_status tools_data_fits(qat_model *m, const qat_dataset *d, qat_split s, const qat_task_kind *kind);

/* n with its thousands grouped by spaces ("416 520"), into buf. */
const char *tools_grouped(int64_t n, char *buf, size_t len);

#endif
