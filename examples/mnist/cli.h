/* qat-mnist: option parsing and the shared bits of every subcommand. */
#ifndef QAT_MNIST_CLI_H
#define QAT_MNIST_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "qat/autograd.h"

#define EXIT_USAGE 2

/* Parses a whole-number option; prints a usage error and returns false on
 * garbage, overflow or a value outside [lo, hi]. */
bool cli_int(const char *prog, const char *opt, const char *text, long lo, long hi, long *out);
bool cli_float(const char *prog, const char *opt, const char *text, double lo, double hi, double *out);
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


#endif
