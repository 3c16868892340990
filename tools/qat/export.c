/* qat export: training checkpoint -> quantized checkpoint (HDF5),
 * ONNX (QDQ), TFLite, and/or C source for a microcontroller
 * (qat/codegen.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "qat/codegen.h"
#include "qat/export.h"
#include "qat/io.h"
#include "qat/onnx.h"
#include "qat/tflite.h"

static const char *const export_usage =
    "usage: qat export --checkpoint CKPT [--out MODEL] [--onnx FILE] [--tflite FILE]\n"
    "                  [--c DIR [--name NAME] [--c-ram fast|small]] [--rounding double|single] [--json]\n"
    "       qat export --quantized MODEL [--tflite FILE] [--c DIR [--name NAME] [--c-ram fast|small]]\n"
    "                  [--rounding double|single] [--json]\n"
    "\n"
    "Turns a QAT training checkpoint (qat train --qat --out CKPT) into a\n"
    "quantized checkpoint: integer weights, scales, zero points, int32 biases,\n"
    "requantization multipliers and shifts, activation parameters and the\n"
    "layer graph (layout: docs/quantized-model-format.md).\n"
    "\n"
    "All or nothing: every output (MODEL, the ONNX and TFLite files, the C) is\n"
    "first made and written in full to a temporary file beside its target,\n"
    "and only when all are written are they renamed into place. If any output\n"
    "fails (a model ONNX, TFLite or the C generator cannot express, a full disk, a\n"
    "bad path), nothing is replaced: every file that was there stays as it\n"
    "was (docs/saving.md, \"Several files at once\").\n"
    "\n"
    "  --checkpoint CKPT   training checkpoint of a --qat run (versions 2 to 4)\n"
    "  --out MODEL         quantized checkpoint to write (e.g. model.qat.h5)\n"
    "  --onnx FILE         also (or instead) write the model as ONNX in QDQ form\n"
    "                      (e.g. model.onnx; docs/onnx.md), atomically too\n"
    "  --tflite FILE       also (or instead) write the model as a TensorFlow Lite\n"
    "                      flatbuffer, int8 in and out, that TFLite's reference\n"
    "                      kernels run to the same integers (docs/tflite.md); train\n"
    "                      with --target tflite when the model has average pools\n"
    "  --c DIR             write C99 for a microcontroller into DIR (made when it\n"
    "                      does not exist; its parent must): NAME.h, NAME.c\n"
    "                      (integers only, no malloc) and NAME_io.c (input\n"
    "                      quantization, output dequantization); docs/codegen.md\n"
    "  --name NAME         the C prefix of the generated API (default model)\n"
    "  --c-ram fast|small  the C's memory plan (default fast); small: depthwise and\n"
    "                      pointwise convolutions written over their input, and a\n"
    "                      convolution followed by a max pool computed a channel at\n"
    "                      a time, for a smaller arena at some cycles' cost\n"
    "                      (docs/codegen.md, \"RAM\")\n"
    "  --rounding R        how every requantization rounds its product (default\n"
    "                      double, or the quantized file's own): double, the\n"
    "                      contract's (gemmlowp's and TFLite's: a rounding high\n"
    "                      multiply, then a rounding shift); single, one rounding\n"
    "                      of the exact 64-bit product, which follows the\n"
    "                      fake-quantized model more closely at 4 bits and below.\n"
    "                      The multipliers are the same; the file, the engine and\n"
    "                      the C carry it (docs/quantization.md, \"Requantization\")\n"
    "  --quantized MODEL   write the C and/or the .tflite file from a quantized\n"
    "                      model file instead of a training checkpoint\n"
    "  --json              print a JSON summary as the last line of stdout\n"
    "                      ({\"error\": ..., \"status\": ...} when it fails)\n"
    "  --help              this text\n";

/* The C file (DIR/NAME.h, NAME.c, NAME_io.c) that is path under any name,
 * into buf; NULL if none is. */
static const char *c_file_is(const char *cdir, const char *name, const char *path, char *buf, size_t len) {
    static const char *const ends[] = {".h", ".c", "_io.c"};
    for (int k = 0; cdir && path && k < 3; k++) {
        snprintf(buf, len, "%s/%s%s", cdir, name, ends[k]);
        if (cli_same_file(buf, path)) return buf;
    }
    return NULL;
}

static void print_c_wrote(const char *dir, const char *name, const qat_codegen_info *info) {
    fprintf(stderr, "qat: wrote %s/%s.h, %s/%s.c and %s/%s_io.c (%d ops; %lld bytes of constants; a static arena "
            "of %lld bytes)\n", dir, name, dir, name, dir, name, info->n_ops, (long long)info->weight_bytes,
            (long long)info->arena_bytes);
}

/* --c DIR must be a directory that exists: said before anything is read. */
static int check_c_dir(const char *P, bool json, const char *dir, bool *create) {
    struct stat st;
    *create = false;
    if (stat(dir, &st) != 0) {
        /* a folder that does not exist yet is made (its parent must exist), right before the files are */
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", dir);
        size_t n = strlen(parent);
        while (n > 1 && parent[n - 1] == '/') parent[--n] = '\0';
        char *slash = strrchr(parent, '/');
        if (slash) *(slash == parent ? slash + 1 : slash) = '\0';
        else snprintf(parent, sizeof parent, ".");
        if (errno != ENOENT || stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
            return cli_fail(P, json, 1, "--c %s: %s", dir, strerror(errno == ENOENT ? ENOENT : errno));
        if (access(parent, W_OK) != 0) return cli_fail(P, json, 1, "--c %s: cannot make it: %s", dir, strerror(errno));
        *create = true;
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) return cli_fail(P, json, 1, "--c %s: not a directory", dir);
    return 0;
}

/* Makes --c's folder when it was missing; 0, or 1 (reported). */
static int make_c_dir(const char *P, bool json, const char *dir, bool create) {
    if (create && mkdir(dir, 0777) != 0 && errno != EEXIST) return cli_fail(P, json, 1, "--c %s: cannot make it: %s", dir, strerror(errno));
    return 0;
}

/* Writes the .tflite file and/or the C source of a program read from a
 * quantized file, all or nothing (one save set); says what it wrote on
 * stderr, and fills info (the C's sizes) and *tfl_bytes. 0, or 1 (reported). */
static int write_from_program(qat_ctx *ctx, const qat_qmodel *q, const char *tflite, const char *dir,
                              const char *name, const qat_codegen_options *copt, bool json, qat_codegen_info *info,
                              long long *tfl_bytes) {
    qat_save_set *set = qat_save_set_new(ctx);
    qat_status st = set ? QAT_OK : qat_ctx_status(ctx);
    if (st == QAT_OK && tflite) st = qat_tflite_stage(ctx, q, tflite, set);
    if (st == QAT_OK && dir) st = qat_codegen_stage_ex(ctx, q, dir, name, copt, set, info);
    if (st == QAT_OK) st = qat_save_set_commit(set);
    qat_save_set_free(set);
    if (st != QAT_OK) return cli_fail("qat", json, 1, "%s", qat_ctx_error(ctx));
    struct stat sb;
    if (tflite) {
        *tfl_bytes = stat(tflite, &sb) == 0 ? (long long)sb.st_size : -1;
        fprintf(stderr, "qat: wrote %s (%lld bytes; TFLite, int8)\n", tflite, *tfl_bytes);
    }
    if (dir) print_c_wrote(dir, name, info);
    return 0;
}

/* Every output of an export from a checkpoint, all or nothing, from one
 * lowering (qat_export_all: a model ONNX or the C generator cannot
 * express, a bad path or a full disk fails before any target changes).
 * 0, or 1 (reported). */
static int stage_and_commit(qat_model *m, int rank, const int64_t *shape, const char *config, const char *out,
                            const char *onnx, const char *tflite, const char *cdir, const char *name,
                            const qat_codegen_options *copt, qat_rounding rounding, bool json,
                            qat_codegen_info *info, int64_t *peak, long long *onnx_bytes, long long *tfl_bytes,
                            long long *bytes) {
    qat_export_targets t = {.qmodel = out, .onnx = onnx, .tflite = tflite, .c_dir = cdir, .c_name = name,
                            .c_options = copt, .config = config, .rounding = rounding};
    qat_export_report r;
    if (qat_export_all(m, rank, shape, &t, &r) != QAT_OK)
        return cli_fail("qat", json, 1, "%s", qat_ctx_error(qat_model_ctx(m)));
    *info = r.c;
    if (out) *peak = r.peak_bytes; /* the integer runtime's plan for one sample */
    struct stat sb;
    if (onnx) *onnx_bytes = stat(onnx, &sb) == 0 ? (long long)sb.st_size : -1;
    if (tflite) *tfl_bytes = stat(tflite, &sb) == 0 ? (long long)sb.st_size : -1;
    if (out) *bytes = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    return 0;
}

/* A JSON number, or null for what this export did not write (-1). */
static void print_json_count(const char *key, long long v) {
    if (v < 0) printf(", \"%s\": null", key);
    else printf(", \"%s\": %lld", key, v);
}

/* The generated C's fields of the JSON summary (after others: a leading comma). */
static void print_c_json(const char *dir, const char *name, const qat_codegen_info *info) {
    printf(", \"c\": ");
    cli_json_str(dir);
    printf(", \"name\": ");
    cli_json_str(name);
    printf(", \"const_bytes\": %lld, \"arena_bytes\": %lld, \"input_size\": %lld, \"output_size\": %lld",
           (long long)info->weight_bytes, (long long)info->arena_bytes, (long long)info->input_size,
           (long long)info->output_size);
}

int cmd_export(int argc, char **argv) {
    const char *P = "qat export", *ckpt = NULL, *out = NULL, *onnx = NULL, *cdir = NULL, *name = "model",
               *quantized = NULL, *tflite = NULL, *cram = "fast", *rounding_arg = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(export_usage, stdout), 0;
        else if (!strcmp(a, "--checkpoint")) { if (!(ckpt = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--out")) { if (!(out = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--onnx")) { if (!(onnx = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--tflite")) { if (!(tflite = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--c")) { if (!(cdir = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--name")) { if (!(name = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--c-ram")) { if (!(cram = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--quantized")) { if (!(quantized = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--rounding")) { if (!(rounding_arg = cli_value(P, argc, argv, &i))) goto usage; }
        else if (!strcmp(a, "--json")) json = true;
        else return cli_usage_fail(P, json, export_usage, "unknown option \"%s\"", a);
    }
    if (strcmp(cram, "fast") && strcmp(cram, "small"))
        return cli_usage_fail(P, json, export_usage, "--c-ram \"%s\": fast or small", cram);
    if (!strcmp(cram, "small") && !cdir) return cli_usage_fail(P, json, export_usage, "--c-ram is for --c DIR");
    if (strcmp(name, "model") && !cdir) return cli_usage_fail(P, json, export_usage, "--name is for --c DIR");
    if (qat_codegen_name_reserved(name)) /* said now, not after the checkpoint is read */
        return cli_usage_fail(P, json, export_usage, "--name \"%s\": %s.h would hide the standard header <%s.h> from a "
                              "build that includes the folder: choose another name", name, name, name);
    if (!qat_codegen_name_ok(name))
        return cli_usage_fail(P, json, export_usage, "--name \"%s\" is not a C identifier of 1 to %d characters", name,
                              QAT_CODEGEN_MAX_NAME);
    const qat_codegen_options copt = {.small_ram = !strcmp(cram, "small")};
    qat_rounding rounding = QAT_ROUNDING_DOUBLE;
    if (rounding_arg && !qat_rounding_parse(rounding_arg, &rounding))
        return cli_usage_fail(P, json, export_usage, "--rounding \"%s\": double or single", rounding_arg);
    if (rounding == QAT_ROUNDING_SINGLE && tflite) /* TFLite's kernels round twice (docs/tflite.md) */
        return cli_usage_fail(P, json, export_usage, "--rounding single and --tflite: TFLite's kernels round the "
                              "requantization twice; export the .tflite from a double-rounding program");
    if (quantized) {
        if (ckpt || out || onnx || (!cdir && !tflite))
            return cli_usage_fail(P, json, export_usage, "--quantized MODEL takes --c DIR and/or --tflite FILE, and "
                                  "none of --checkpoint, --out, --onnx");
        if (tflite && cli_same_file(quantized, tflite))
            return cli_usage_fail(P, json, export_usage, "--tflite %s is the quantized model itself", tflite);
        char cf[4400];
        if (c_file_is(cdir, name, quantized, cf, sizeof cf) || c_file_is(cdir, name, tflite, cf, sizeof cf))
            return cli_usage_fail(P, json, export_usage, "--c %s would write %s, which is %s", cdir, cf,
                                  cli_same_file(cf, quantized) ? "the quantized model itself" : "--tflite's file too");
        bool create = false;
        if (cdir && check_c_dir("qat", json, cdir, &create)) return 1;
        qat_ctx *ctx = qat_ctx_new();
        if (!ctx) return cli_fail("qat", json, 1, "out of memory");
        qat_qmodel q;
        qat_codegen_info info = {0};
        long long tfl_bytes = -1;
        int rc = qat_qmodel_load(ctx, quantized, &q) != QAT_OK ? cli_fail("qat", json, 1, "%s", qat_ctx_error(ctx)) : 0;
        if (rc == 0 && rounding_arg && q.rounding != rounding) { /* the same multipliers, rounded the other way */
            fprintf(stderr, "qat: note: %s rounds its requantization %s; the outputs written here round it %s, so "
                    "their integers differ from the file's now and then (docs/codegen.md)\n", quantized,
                    q.rounding == QAT_ROUNDING_SINGLE ? "once" : "twice", rounding == QAT_ROUNDING_SINGLE ? "once" : "twice");
            q.rounding = rounding;
        }
        if (rc == 0)
            rc = cdir && make_c_dir("qat", json, cdir, create)
                     ? 1
                     : write_from_program(ctx, &q, tflite, cdir, name, &copt, json, &info, &tfl_bytes);
        if (rc && create) rmdir(cdir); /* made for this export: nothing stays of a failed one */
        if (rc == 0 && json) {
            printf("{\"quantized\": ");
            cli_json_str(quantized);
            printf(", \"tflite\": ");
            tflite ? cli_json_str(tflite) : (void)printf("null");
            print_json_count("tflite_bytes", tfl_bytes);
            if (cdir) print_c_json(cdir, name, &info);
            printf("}\n");
        }
        qat_ctx_free(ctx);
        return rc;
    }
    if (!ckpt || (!out && !onnx && !tflite && !cdir))
        return cli_usage_fail(P, json, export_usage, "--checkpoint and one of --out, --onnx, --tflite, --c are required");
    /* The same file under any name (a link, "./x"): the export would replace the checkpoint. */
    const char *outs[3] = {out, onnx, tflite}, *opts[3] = {"--out", "--onnx", "--tflite"};
    for (int k = 0; k < 3; k++) {
        const char *o = outs[k], *opt = opts[k];
        if (o && cli_same_file(ckpt, o))
            return cli_usage_fail(P, json, export_usage, "%s %s is the checkpoint itself: exporting would overwrite it",
                                  opt, o);
    }
    for (int j = 0; j < 3; j++)
        for (int k = j + 1; k < 3; k++)
            if (outs[j] && outs[k] && cli_same_file(outs[j], outs[k]))
                return cli_usage_fail(P, json, export_usage, "%s and %s name the same file", opts[j], opts[k]);
    char cf[4400];
    if (c_file_is(cdir, name, ckpt, cf, sizeof cf))
        return cli_usage_fail(P, json, export_usage, "--c %s would write %s, the checkpoint itself: exporting would "
                              "overwrite it", cdir, cf);
    for (int k = 0; k < 3; k++)
        if (c_file_is(cdir, name, outs[k], cf, sizeof cf))
            return cli_usage_fail(P, json, export_usage, "--c %s would write %s, which %s writes too", cdir, cf, opts[k]);
    bool create_cdir = false;
    if (cdir && check_c_dir("qat", json, cdir, &create_cdir)) return 1; /* every target is checked before the work */
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return cli_fail("qat", json, 1, "out of memory");
    int rc = 1;
    qat_model *m = NULL;
    static char config[1 << 16];
    if (qat_checkpoint_model(ctx, ckpt, &m, config, sizeof config) != QAT_OK) goto fail;
    if (!qat_model_prepared(m)) {
        rc = cli_fail("qat", json, EXIT_USAGE, "%s is a float checkpoint: train with --qat to get a model that can be "
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
    qat_codegen_info info = {0};
    long long onnx_bytes = -1, tfl_bytes = -1, bytes = -1;
    if (cdir && make_c_dir("qat", json, cdir, create_cdir)) goto done;
    if (stage_and_commit(m, rank, shape, config, out, onnx, tflite, cdir, name, &copt, rounding, json, &info, &peak, &onnx_bytes,
                         &tfl_bytes, &bytes)) {
        if (create_cdir) rmdir(cdir); /* made for this export: nothing stays of a failed one */
        goto done;
    }
    int64_t n_weights = qat_model_n_quantized_weights(m);
    const qat_prepare_config *qc = qat_model_qat_config(m, NULL);
    if (onnx)
        fprintf(stderr, "qat: wrote %s (%lld bytes; ONNX, QDQ form, opset %d)\n", onnx, onnx_bytes, QAT_ONNX_OPSET);
    if (tflite) fprintf(stderr, "qat: wrote %s (%lld bytes; TFLite, int8)\n", tflite, tfl_bytes);
    /* the weights' bit widths: one, or a range when layers have their own */
    int wlo, whi;
    qat_model_weight_bits(m, &wlo, &whi);
    char wbits[32];
    if (wlo == whi) snprintf(wbits, sizeof wbits, "%d", wlo);
    else snprintf(wbits, sizeof wbits, "%d to %d", wlo, whi);
    if (onnx && whi == 8) /* the one target whose integers depend on the CPU that runs it */
        fprintf(stderr, "qat: note: onnxruntime on x86 CPUs without VNNI (AVX2 only) saturates sums of 8-bit weights "
                "and gives other integers: train with --wbits 7 for such a CPU (docs/onnx.md)\n");
    if (out && peak >= 0)
        fprintf(stderr, "qat: wrote %s (%lld bytes; %lld weights of %s bits; the integer runtime's peak "
                "activation memory %lld bytes per sample)\n", out, bytes, (long long)n_weights, wbits, (long long)peak);
    else if (out) /* no integer plan: the int engine cannot run it (weights wider than 8 bits: the hybrid engine) */
        fprintf(stderr, "qat: wrote %s (%lld bytes; %lld weights of %s bits; not for the int engine, which takes "
                "weights of at most 8 bits: eval --engine hybrid runs it)\n", out, bytes, (long long)n_weights, wbits);
    if (cdir) print_c_wrote(cdir, name, &info);
    if (json) { /* one object for everything written */
        printf("{\"checkpoint\": ");
        cli_json_str(ckpt);
        printf(", \"out\": ");
        out ? cli_json_str(out) : (void)printf("null");
        print_json_count("bytes", bytes);
        printf(", \"weights\": %lld, \"wbits\": %d, \"abits\": %d", (long long)n_weights, qc->wbits, qc->abits);
        print_json_count("peak_activation_bytes", (long long)peak);
        printf(", \"onnx\": ");
        onnx ? cli_json_str(onnx) : (void)printf("null");
        print_json_count("onnx_bytes", onnx_bytes);
        printf(", \"tflite\": ");
        tflite ? cli_json_str(tflite) : (void)printf("null");
        print_json_count("tflite_bytes", tfl_bytes);
        if (cdir) print_c_json(cdir, name, &info);
        printf("}\n");
    }
    rc = 0;
    goto done;
fail:
    cli_fail("qat", json, 1, "%s", qat_ctx_error(ctx));
done:
    qat_ctx_free(ctx);
    return rc;
usage: /* cli_value said which option lacks its value */
    if (json) cli_json_error("an option lacks its value", EXIT_USAGE);
    return EXIT_USAGE;
}
