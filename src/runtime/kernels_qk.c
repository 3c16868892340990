/* The portable level's requantizing kernels: qk.h's (the source the
 * generated C ships) behind the runtime's argument records. This file is
 * compiled twice, as the program's rounding is a constant of the kernels
 * (qk.h's QK_SINGLE_ROUNDING, as in the generated C): here with the
 * contract's double rounding, under the names qat__qkr_*_double, and by
 * kernels_qk_single.c with the single one, as qat__qkr_*_single.
 * kernels.c's entry points pick one by the records' single. On aarch64
 * Linux, kernels_qk_dot.c and kernels_qk_dot_single.c compile it twice
 * more for cores with the dot-product extension (qat__qkr_*_dot_*), which
 * kernels.c takes where the CPU has it. */
#include "kernels.h"
#include "qk.h"

#if defined(QKR_DOT) && QK_SINGLE_ROUNDING /* kernels_qk_dot*.c: for cores with the dot-product extension */
#define QKR_NAME(name) qat__qkr_##name##_dot_single
#elif defined(QKR_DOT)
#define QKR_NAME(name) qat__qkr_##name##_dot_double
#elif QK_SINGLE_ROUNDING
#define QKR_NAME(name) qat__qkr_##name##_single
#else
#define QKR_NAME(name) qat__qkr_##name##_double
#endif

void QKR_NAME(avgpool)(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                       const qat__requant_args *r, int8_t *y) {
    int OH = (H + 2 * ph - kh) / sh + 1, OW = (W + 2 * pw - kw) / sw + 1;
    qk_avgpool(x, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW, r->zp_in, r->m0, r->shift, r->zp_out, r->lo, r->hi, y);
}

void QKR_NAME(global_avgpool)(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    qk_global_avgpool(x, C, HW, r->zp_in, r->m0, r->shift, r->zp_out, r->lo, r->hi, y);
}

void QKR_NAME(requant)(const int8_t *x, int32_t n, const qat__requant_args *r, int8_t *y) {
    qk_requant_s8(x, n, r->zp_in, r->m0, r->shift, r->zp_out, r->lo, r->hi, y);
}

void QKR_NAME(add)(const int8_t *a, const int8_t *b, int32_t n, const qat__add_args *r, int8_t *y) {
    qk_add(a, b, n, r->zp_a, r->zp_b, r->left_shift, r->m_a, r->sh_a, r->m_b, r->sh_b, r->m_out, r->sh_out, r->zp_out,
           r->lo, r->hi, y);
}

void QKR_NAME(mul)(const int8_t *a, const int8_t *b, int32_t n, int32_t per, const qat__mul_args *r, int8_t *y) {
    qk_mul(a, b, n, per, r->zp_a, r->zp_b, r->m0, r->shift, r->zp_out, r->lo, r->hi, y);
}

/* The block size as a literal, so each call is specialised like the
 * generated code's. */
#define QK_BY_BLOCK(B, call) \
    switch (B) {             \
    case 4: call(4); break;  \
    case 3: call(3); break;  \
    case 2: call(2); break;  \
    default: call(1); break; \
    }

void QKR_NAME(conv)(const int8_t *x, const qat__qk_conv_args *a, int8_t *y) {
#define CONV(B)                                                                                                     \
    qk_conv(x, a->w, 8, NULL, a->C, a->H, a->W, a->O, a->OH, a->OW, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw,         \
            a->groups, B, a->bias, a->m0, a->shift, 1, a->zp_in, a->zp, a->lo, a->hi, y)
#define PAIRS(B)                                                                                                     \
    qk_conv_pairs(x, a->w, 8, NULL, a->C, a->H, a->W, a->O, a->OH, a->OW, a->kh, a->kw, a->sh, a->sw, a->ph,    \
                  a->pw, a->groups, B, a->bias, a->m0, a->shift, 1, a->zp_in, a->zp, a->lo, a->hi, y)
    if (qk_conv_uses_dw3(a->C, a->O, a->groups, a->W, a->kh, a->kw, a->sw, a->ph, a->pw)) {
        qk_dwconv3(x, a->w, a->C, a->H, a->W, a->OH, a->OW, a->sh, a->sw, a->ph, a->pw, a->bias, a->m0, a->shift, 1,
                   a->zp_in, a->zp, a->lo, a->hi, y);
    } else if (qk_conv_uses_pw(a->C, a->groups, a->H, a->W, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw)) {
#define PW(B)                                                                                                    \
    qk_conv_pw(x, a->w, a->C, a->H * a->W, a->H * a->W, a->O, a->H * a->W, B, a->bias, a->m0, a->shift, 1, a->zp_in, a->zp, \
               a->lo, a->hi, y)
        QK_BY_BLOCK(qk_pw_block(a->O), PW)
#undef PW
    } else if (qk_conv_uses_pairs(a->C, a->groups, a->kw)) {
        QK_BY_BLOCK(qk_block(a->O / a->groups), PAIRS)
    } else {
        QK_BY_BLOCK(qk_block(a->O / a->groups), CONV)
    }
#undef CONV
#undef PAIRS
}

void QKR_NAME(linear)(const int8_t *x, const qat__qk_conv_args *a, int8_t *y) {
#define LINEAR(B) \
    qk_linear(x, a->w, 8, a->C, a->O, B, 0, NULL, NULL, a->bias, a->m0, a->shift, 1, a->zp_in, a->zp, a->lo, a->hi, y)
    QK_BY_BLOCK(qk_block(a->O), LINEAR)
#undef LINEAR
}
