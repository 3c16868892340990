/* qat-mnist export: training checkpoint -> quantized checkpoint (HDF5) and/or ONNX (QDQ). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "qat/export.h"
#include "qat/io.h"
#include "qat/onnx.h"

static const char *const export_usage =
    "usage: qat-mnist export --checkpoint CKPT [--out MODEL] [--onnx FILE] [--json]\n"
    "\n"
    "Turns a QAT training checkpoint (qat-mnist train --qat --out CKPT) into a\n"
    "quantized checkpoint: integer weights, scales, zero points, int32 biases,\n"
    "requantization multipliers and shifts, activation parameters and the\n"
    "layer graph (layout: docs/quantized-model-format.md). The file is written\n"
    "atomically: MODEL is either the old file or the complete new one.\n"
    "\n"
    "  --checkpoint CKPT   training checkpoint (version 2) of a --qat run\n"
    "  --out MODEL         quantized checkpoint to write (e.g. model.qat.h5)\n"
    "  --onnx FILE         also (or instead) write the model as ONNX in QDQ form\n"
    "                      (e.g. model.onnx; docs/onnx.md), atomically too\n"
    "  --json              print a JSON summary as the last line of stdout\n"
    "                      ({\"error\": ..., \"status\": ...} when it fails)\n"
    "  --help              this text\n";

int cmd_export(int argc, char **argv) {
    const char *P = "qat-mnist export", *ckpt = NULL, *out = NULL, *onnx = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(export_usage, stdout), 0;
        else if (!strcmp(a, "--checkpoint")) { if (!(ckpt = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--out")) { if (!(out = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--onnx")) { if (!(onnx = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--json")) json = true;
        else {
            fprintf(stderr, "%s: unknown option \"%s\"\n", P, a);
            goto usage;
        }
    }
    if (!ckpt || (!out && !onnx))
        return cli_usage_fail(P, json, export_usage, "--checkpoint and --out (or --onnx) are required");
    /* The same file under any name (a link, "./x"): the export would replace the checkpoint. */
    struct stat cs, os;
    for (int k = 0; k < 2; k++) {
        const char *o = k ? onnx : out, *opt = k ? "--onnx" : "--out";
        if (o && (!strcmp(ckpt, o) || (stat(ckpt, &cs) == 0 && stat(o, &os) == 0 && cs.st_dev == os.st_dev &&
                                       cs.st_ino == os.st_ino)))
            return cli_usage_fail(P, json, export_usage, "%s %s is the checkpoint itself: exporting would overwrite it",
                                  opt, o);
    }
    if (out && onnx && !strcmp(out, onnx))
        return cli_usage_fail(P, json, export_usage, "--out and --onnx name the same file");
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return cli_fail("qat-mnist", json, 1, "out of memory");
    int rc = 1;
    qat_model *m = NULL;
    static char config[1 << 16];
    if (qat_checkpoint_model(ctx, ckpt, &m, config, sizeof config) != QAT_OK) goto fail;
    if (!qat_model_prepared(m)) {
        cli_fail("qat-mnist", json, 1, "%s is a float checkpoint: train with --qat to get a model that can be "
                 "exported to integers", ckpt);
        goto done;
    }
    /* the model's declared input; a version-2 checkpoint declares none:
     * MNIST's [1, 28, 28] for a conv net, [784] otherwise */
    int64_t shape[3] = {1, 28, 28}, declared[3];
    int rank = qat_model_input_shape(m, declared);
    if (rank) memcpy(shape, declared, sizeof shape);
    else if (qat_model_layer_kind(m, 1) == QAT_LAYER_CONV2D) rank = 3;
    else rank = 1, shape[0] = 784;
    int64_t peak = -1;
    /* ONNX first: a model ONNX cannot express is refused before any file is written */
    struct stat sb;
    long long onnx_bytes = -1;
    if (onnx && qat_onnx_export(m, rank, shape, config, onnx) != QAT_OK) goto fail;
    if (onnx) {
        onnx_bytes = stat(onnx, &sb) == 0 ? (long long)sb.st_size : -1;
        fprintf(stderr, "qat-mnist: wrote %s (%lld bytes; ONNX, QDQ form, opset %d)\n", onnx, onnx_bytes, QAT_ONNX_OPSET);
    }
    if (out && qat_export(m, rank, shape, config, out, &peak) != QAT_OK) goto fail;
    long long bytes = out && stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    int64_t n_weights = qat_model_n_quantized_weights(m);
    const qat_prepare_config *qc = qat_model_qat_config(m, NULL);
    if (out)
        fprintf(stderr, "qat-mnist: wrote %s (%lld bytes; %lld weights of %d bits; the integer runtime's peak "
                "activation memory %lld bytes per sample)\n", out, bytes, (long long)n_weights, qc->wbits, (long long)peak);
    if (json) {
        printf("{\"checkpoint\": ");
        cli_json_str(ckpt);
        printf(", \"out\": ");
        out ? cli_json_str(out) : (void)printf("null");
        printf(", \"bytes\": %lld, \"weights\": %lld, \"wbits\": %d, \"abits\": %d, \"peak_activation_bytes\": %lld",
               bytes, (long long)n_weights, qc->wbits, qc->abits, (long long)peak);
        printf(", \"onnx\": ");
        onnx ? cli_json_str(onnx) : (void)printf("null");
        printf(", \"onnx_bytes\": %lld}\n", onnx_bytes);
    }
    rc = 0;
    goto done;
fail:
    cli_fail("qat-mnist", json, 1, "%s", qat_ctx_error(ctx));
done:
    qat_ctx_free(ctx);
    return rc;
usage:
    fputs(export_usage, stderr);
    return EXIT_USAGE;
}
