/* qat fit's firmware check: the generated C compiled and linked for a
 * Cortex-M core by the Arm cross toolchain, and measured on the linked
 * binary (docs/fit.md, "The check on the linked binary"). */
#ifndef QAT_TOOL_FIT_BUILD_H
#define QAT_TOOL_FIT_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cores fit builds for (NULL-ended): the names -mcpu takes. */
extern const char *const fit_cores[];

typedef struct {
    int64_t code;       /* .text: the model's functions and what they call from the C library */
    int64_t constants;  /* .rodata: weights, biases, multipliers, tables */
    int64_t ram;        /* every writable section: the arena (.bss), .data, the C library's */
    int64_t stack;      /* the deepest call chain from NAME_run: each function's static frame
                           (GCC's -fcallgraph-info=su), a C library function counted as FIT_LIB_FRAME */
    bool stack_bounded; /* false: a frame of dynamic size, or recursion (stack is then a lower bound) */
} fit_build;

#define FIT_LIB_FRAME 32 /* bytes assumed for a C library function's frame (memcpy) */

/* Runs argv (argv[0] looked up on the PATH; no shell) with stdout to out
 * (NULL: the log) and stderr to the log, appending, ended after seconds
 * (0: no limit); its exit status, or -1 (it could not start, or a signal
 * ended it). */
int fit_run_program(char *const argv[], const char *log, const char *out, unsigned seconds);

/* Is prog executable, as a path or found on the PATH? */
bool fit_on_path(const char *prog);

/* Is the compiler cc (a name found on the PATH, or a path) there, with
 * its size program (cc with "gcc" at the end replaced by "size")? */
bool fit_toolchain_found(const char *cc, char *why, size_t len);

/* Compiles dir/name.c for core (-mthumb -O2, sections per function and
 * object), links it with NAME_run as the entry (unused code and data
 * dropped), writes dir/name.elf, and measures it; the compiler's and
 * linker's output go to dir/build.log. 0, or -1 with a one-line reason
 * in why. */
int fit_build_c(const char *dir, const char *name, const char *core, const char *cc, fit_build *out, char *why,
                size_t len);

#endif
