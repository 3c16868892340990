/* qat: option parsing and the shared bits of every subcommand. */
#ifndef QAT_TOOL_CLI_H
#define QAT_TOOL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat/autograd.h"
#include "qat/layers.h"

#define EXIT_USAGE 2

#if defined(__GNUC__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

/* Failures. Every failure a command meets once its options are read goes
 * through one of these, so that with --json the last line of stdout is
 * still one JSON object, {"error": "<message>", "status": <status>}, as
 * scripts that read that line expect. (A command line that cannot be read
 * at all prints only the usage: --json may not have been seen yet.)
 *
 * cli_fail prints "<prog>: <message>" on stderr, the JSON line when json
 * is set, and returns status; cli_usage_fail does the same followed by
 * the usage text on stderr, and returns EXIT_USAGE. The JSON line's
 * message has no "<prog>: " prefix. Return right after: nothing may
 * follow the JSON line on stdout. */
int cli_fail(const char *prog, bool json, int status, const char *fmt, ...) CLI_PRINTF(4, 5);
int cli_usage_fail(const char *prog, bool json, const char *usage, const char *fmt, ...) CLI_PRINTF(4, 5);
/* The exit status of a failure the library reported: 2 when the input is
 * bad (a file or data set of the wrong form, a configuration the model
 * or the data cannot take: QAT_ERR_ARG, _SHAPE, _FORMAT, _UNSUPPORTED),
 * 1 otherwise (the system: I/O, memory; or a run that went wrong). */
int cli_status_of(qat_status st);
/* Do two paths name the same file (the same text, or the same device
 * and inode: a link, "./x")? An output that is one of the command's own
 * inputs would destroy it. */
bool cli_same_file(const char *a, const char *b);
/* Whether writing the file path would write into the data set at data:
 * path is data itself, or data is a directory (of .npy or IDX files) and
 * path a file directly in it (one of its files, or a new one: a stray
 * .npy makes the directory unreadable as a data set). */
bool cli_in_data(const char *path, const char *data);
/* A path for an output (of option opt; NULL: none): its folder exists and
 * can be written, and it is not a folder itself. Checked before long work:
 * 0, or 1 (reported). */
int cli_check_output(const char *prog, bool json, const char *opt, const char *path);
/* Prints {"error": message, "status": status} and a newline on stdout. */
void cli_json_error(const char *message, int status);

/* Enumerated option values: the index of value in allowed (a NULL-ended
 * list), or -1. cli_choice_list writes the list as "a, b or c" into buf
 * (for messages that name what is allowed) and returns buf. */
int cli_choice(const char *value, const char *const *allowed);
const char *cli_choice_list(const char *const *allowed, char *buf, size_t len);

/* strtol over the whole text, in [lo, hi]; false (and nothing printed)
 * on garbage, overflow or a value out of range. */
bool cli_parse_long(const char *text, long lo, long hi, long *out);
/* Parses a whole-number option; prints a usage error and returns false on
 * garbage, overflow or a value outside [lo, hi]. */
bool cli_int(const char *prog, const char *opt, const char *text, long lo, long hi, long *out);
bool cli_float(const char *prog, const char *opt, const char *text, double lo, double hi, double *out);
/* The model limits' options (qat_model_limits, qat/layers.h), which a
 * model bigger than the defaults needs: --max-params N,
 * --max-activation-bytes N, --max-layers N. 1 when argv[*i] is one of
 * them and its value went into l (advancing *i), 0 when it is none of
 * them, -1 for a bad value (reported). CLI_LIMITS_USAGE: their usage lines. */
int cli_limit_option(const char *prog, int argc, char **argv, int *i, qat_model_limits *l);
#define CLI_LIMITS_USAGE \
    "  --max-params N, --max-activation-bytes N, --max-layers N\n" \
    "                              raise the model size limits (docs/model-format.md)\n"
/* The value after argv[*i], advancing *i; NULL (with a message) if absent. */
const char *cli_value(const char *prog, int argc, char **argv, int *i);
double cli_peak_rss_mib(void);
/* Prints s to stdout as a JSON string (quoted, escaped). */
void cli_json_str(const char *s);
double cli_now(void);
/* Tells the user (stderr) when OpenBLAS runs its generic Prescott kernels
 * on a CPU with AVX2 or AVX-512, and what to export instead. */
void cli_blas_note(void);
/* The OPENBLAS_CORETYPE to suggest when OpenBLAS fell back to Prescott on
 * a CPU with AVX2 or AVX-512; NULL when there is nothing better. */
const char *cli_blas_better_core(void);

int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_fit(int argc, char **argv);


#endif
