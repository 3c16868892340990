/* The one header through which the tests, the benchmarks of single
 * kernels and the fuzz targets reach qat's private layouts.
 *
 * Every suite tests the public API first (the headers of include/qat).
 * Some properties can only be seen inside: that every kernel level gives
 * the portable level's integers (the runtime's kernels and levels), that
 * the training kernels' fast rows equal the portable ones (autograd's
 * tape and rows), what a model holds after a file is read (the layers'
 * layout and attributes, the quantizers' state), the sub-channel
 * accumulation scales, a data set's stores. Those files include this
 * header, and only this one, rather than reaching into src/ themselves:
 * the private headers they depend on are listed here, in one place. */
#ifndef QAT_TESTS_INTERNALS_H
#define QAT_TESTS_INTERNALS_H

#include "autograd/internal.h"    /* the tape's state, the AVX-512 rows */
#include "data/dataset_internal.h" /* a data set's stores (the NumPy reader's fuzz target) */
#include "export/internal.h"      /* the sub-channel accumulation scales */
#include "fakequant/internal.h"   /* observers and quantizers */
#include "layers/internal.h"      /* the model's layers, their attributes and quantizers */
#include "runtime/kernels.h"      /* the kernels and their levels */
#include "runtime/qk.h"           /* the portable kernels, shared with the generated C */
#include "runtime/subchannel.h"   /* sub-channel weights block by block */

#endif
