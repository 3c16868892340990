/* Instruction-set levels: what the CPU has (GCC's and clang's
 * __builtin_cpu_supports, which read CPUID once at load) and the cap the
 * environment sets (QAT_MAX_ISA). The cap is read at each call, not
 * cached: no state of our own, and the callers ask once per op or plan,
 * never per element. */
#include <stdlib.h>
#include <string.h>

#include "qat/core.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* AVX-VNNI (VEX-encoded vpdpbusd): CPUID leaf 7, sub-leaf 1, EAX bit 4.
 * Read here because clang 14's __builtin_cpu_supports does not know it;
 * the OS's saving of ymm state is what the "avx2" check already asks. */
static bool cpu_avx_vnni(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
}
#endif

static const char *const isa_names[QAT_ISA_COUNT] = {"portable", "avx2", "avx_vnni", "avx512", "avx512_vnni"};

const char *qat_isa_str(qat_isa isa) { return (unsigned)isa < QAT_ISA_COUNT ? isa_names[isa] : "unknown"; }

bool qat_isa_cpu_has(qat_isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (isa) {
    case QAT_ISA_PORTABLE: return true;
    case QAT_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case QAT_ISA_AVX_VNNI: return __builtin_cpu_supports("avx2") && cpu_avx_vnni();
    case QAT_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    case QAT_ISA_AVX512_VNNI: return qat_isa_cpu_has(QAT_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
    case QAT_ISA_COUNT: break;
    }
    return false;
#else
    return isa == QAT_ISA_PORTABLE;
#endif
}

qat_status qat_isa_cap(qat_isa *cap) {
    if (!cap) return QAT_ERR_ARG;
    *cap = QAT_ISA_COUNT - 1;
    const char *v = getenv("QAT_MAX_ISA");
    if (!v || !*v) return QAT_OK;
    for (int i = 0; i < QAT_ISA_COUNT; i++)
        if (!strcmp(v, isa_names[i])) {
            *cap = (qat_isa)i;
            return QAT_OK;
        }
    return QAT_ERR_ARG;
}

bool qat_isa_allowed(qat_isa isa) {
    qat_isa cap;
    qat_isa_cap(&cap);
    return isa <= cap && qat_isa_cpu_has(isa);
}

qat_isa qat_isa_active(void) {
    for (int i = QAT_ISA_COUNT - 1; i > 0; i--)
        if (qat_isa_allowed((qat_isa)i)) return (qat_isa)i;
    return QAT_ISA_PORTABLE;
}
