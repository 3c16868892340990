/* kernels_qk.c for aarch64 cores with the dot-product extension (qk.h's
 * SDOT paths, Q_DOT), under the names qat__qkr_*_dot_double (and, through
 * kernels_qk_dot_single.c, _dot_single). kernels.c takes them where the
 * CPU says it has the extension (qat__cpu_dotprod), so one build serves
 * every aarch64 core. Nothing elsewhere. */
#include "kernels.h"

#if QAT__QK_DOT
#pragma GCC target("arch=armv8.2-a+dotprod")
#define QKR_DOT 1
#include "kernels_qk.c"
#else
typedef int qat__qk_dot_unused; /* ISO C wants a declaration in every file */
#endif
