/* kernels_qk_dot.c with the single rounding: qat__qkr_*_dot_single. */
#define QK_SINGLE_ROUNDING 1
#include "kernels_qk_dot.c"
