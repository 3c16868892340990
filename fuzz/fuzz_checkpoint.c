/* libFuzzer target: any bytes as a training checkpoint, through every
 * reader: qat_checkpoint_model (rebuilds whatever architecture the file
 * records), qat_checkpoint_load into a freshly built LeNet prepared with
 * qat_prepare's defaults (with Adam state and a sample order to fill), and
 * qat_checkpoint_info and qat_checkpoint_config. Each reader gets its own
 * context, so one's failure cannot hide another's path. */
#include "fuzz_file.h"

#include <string.h>

#include "qat/io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("checkpoint");
    return 0;
}

static void rebuild(const char *path) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = NULL;
    char config[256];
    qat_checkpoint_model(ctx, path, &m, config, sizeof config);
    qat_ctx_free(ctx);
}

/* The model qat trains with --qat, as qat would resume it. */
static void load_into_lenet(const char *path) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = ctx ? qat_model_new(ctx) : NULL;
    qat_prepare_config qc = qat_prepare_defaults();
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim opt;
    memset(&opt, 0, sizeof opt);
    int32_t order[256];
    qat_train_state ts = {.order = order, .n_order = 256};
    if (m && qat_model_lenet(m, false) == QAT_OK && qat_model_build(m, 1) == QAT_OK &&
        qat_prepare(m, &qc) == QAT_OK && qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m)) == QAT_OK)
        qat_checkpoint_load(m, &opt, NULL, &ts, path);
    qat_ctx_free(ctx);
}

static void info_and_config(const char *path) {
    qat_ctx *ctx = qat_ctx_new();
    int64_t step, epoch;
    bool prepared;
    qat_checkpoint_info(ctx, path, &step, &epoch, &prepared);
    qat_ctx_clear_error(ctx);
    char config[64]; /* short: texts that do not fit must fail cleanly */
    qat_checkpoint_config(ctx, path, config, sizeof config);
    qat_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    rebuild(path);
    load_into_lenet(path);
    info_and_config(path);
    return 0;
}
