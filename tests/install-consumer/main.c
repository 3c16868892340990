/* A program outside the qat tree, built against the installed package. */
#include <qat/layers.h>
#include <stdio.h>
int main(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, false);
    if (qat_model_build(m, 1) != QAT_OK) return 1;
    printf("lenet with %lld parameters\n", (long long)qat_model_n_params(m));
    qat_ctx_free(ctx);
    return 0;
}
