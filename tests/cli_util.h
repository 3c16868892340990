/* Running the qat program from a CUnit suite: its exit status, its
 * stderr and stdout, and the numbers in its one-line JSON. The suite
 * defines cli_bin (the program) and cli_dir (a directory for the
 * captured output) before using these. */
#ifndef QAT_TEST_CLI_UTIL_H
#define QAT_TEST_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qat/context.h"
#include "qat/data.h"

static const char *cli_bin;
static char cli_dir[256];

/* path's first len - 1 bytes into out, NUL-terminated ("" if unreadable). */
static inline void cli_slurp(const char *path, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

/* Runs the program with args (a shell fragment: quote paths), env (may
 * be NULL) before it; returns its exit status; stderr goes to err, stdout
 * to out (either may be NULL). */
static inline int cli_run_env(const char *env, const char *args, char *err, size_t elen, char *out, size_t olen) {
    char cmd[4096], errf[300], outf[300];
    snprintf(errf, sizeof errf, "%s/stderr.txt", cli_dir);
    snprintf(outf, sizeof outf, "%s/stdout.txt", cli_dir);
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s '%s' %s >'%s' 2>'%s'", env ? env : "", cli_bin, args, outf,
             errf);
    int st = system(cmd);
    if (err) cli_slurp(errf, err, elen);
    if (out) cli_slurp(outf, out, olen);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline int cli_run(const char *args, char *err, size_t elen, char *out, size_t olen) {
    return cli_run_env(NULL, args, err, elen, out, olen);
}

/* The last line of text (without its newline), into line. */
static inline void cli_last_line(const char *text, char *line, size_t len) {
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] == '\n') n--;
    size_t start = n;
    while (start > 0 && text[start - 1] != '\n') start--;
    snprintf(line, len, "%.*s", (int)(n - start), text + start);
}

/* The number after the first "key": in json at or after from; -1 if
 * absent, -2 if null. */
static inline double cli_json_number(const char *json, const char *key) {
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    p += strlen(pat);
    return strncmp(p, "null", 4) ? strtod(p, NULL) : -2;
}

/* text as the whole content of the file path; false if it cannot be written. */
static inline bool cli_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

/* A seeded regression set of n samples in dir (made here): 8 features x
 * of N(0, 1), 2 targets a fixed linear map of x, as train_ and test_
 * .npy files (the same samples in both), and dir/reg.qnet, a two-layer
 * model for it. false if anything could not be written. */
static inline bool cli_regression_set(const char *dir, int n) {
    enum { F = 8, T = 2 };
    char path[600];
    float *x = malloc(sizeof(float) * F * (size_t)n), *y = malloc(sizeof(float) * T * (size_t)n);
    qat_ctx *ctx = qat_ctx_new();
    bool ok = x && y && ctx && mkdir(dir, 0755) == 0;
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    for (int i = 0; ok && i < n; i++) {
        float *xi = x + F * i;
        for (int f = 0; f < F; f++) xi[f] = qat_rng_normal(&rng);
        y[T * i] = xi[0] - 0.5f * xi[3], y[T * i + 1] = 0.25f * xi[5] + xi[7];
    }
    const char *names[2][2] = {{"train_x.npy", "train_y.npy"}, {"test_x.npy", "test_y.npy"}};
    for (int s = 0; ok && s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[s][0]);
        ok = qat_npy_save(ctx, path, QAT_DT_F32, 2, (int64_t[]){n, F}, x) == QAT_OK;
        snprintf(path, sizeof path, "%s/%s", dir, names[s][1]);
        ok = ok && qat_npy_save(ctx, path, QAT_DT_F32, 2, (int64_t[]){n, T}, y) == QAT_OK;
    }
    snprintf(path, sizeof path, "%s/reg.qnet", dir);
    ok = ok && cli_write_file(path, "input shape=8\nlinear fc1 input out=16\nrelu r1 fc1\nlinear fc2 r1 out=2\n");
    free(x), free(y);
    qat_ctx_free(ctx);
    return ok;
}

#endif
