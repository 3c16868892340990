/* Running the qat program from a CUnit suite: its exit status, its
 * stderr and stdout, and the numbers in its one-line JSON. The suite
 * defines cli_bin (the program) and cli_dir (a directory for the
 * captured output) before using these. */
#ifndef QAT_TEST_CLI_UTIL_H
#define QAT_TEST_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

#endif
