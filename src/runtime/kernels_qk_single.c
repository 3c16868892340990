/* kernels_qk.c with the single rounding (qat_rounding): its kernels under
 * the names qat__qkr_*_single. */
#define QK_SINGLE_ROUNDING 1
#include "kernels_qk.c"
