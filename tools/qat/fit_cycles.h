/* qat fit's cycle budget: the generated C built into a firmware for
 * qemu's mps2-an386 board (a Cortex-M4) around a few samples, run under
 * qemu-system-arm with the cycle-pricing plugin (bench/m4cycles,
 * docs/cycle-model.md), and its estimated cycles per inference read back
 * per op (docs/fit.md, "Cycles"). */
#ifndef QAT_TOOL_FIT_CYCLES_H
#define QAT_TOOL_FIT_CYCLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat/codegen.h"

/* Where the pieces are. */
typedef struct {
    const char *cc;     /* the Arm cross compiler */
    const char *qemu;   /* qemu-system-arm */
    const char *plugin; /* the plugin's shared object */
} fit_cycle_tools;

/* Are qemu and the plugin there? false with a one-line reason (what to
 * install or build) in why. */
bool fit_cycle_tools_found(const fit_cycle_tools *t, char *why, size_t len);

/* The plugin the build made (empty when it made none): QAT_M4CYCLES_PLUGIN
 * in the environment wins. */
const char *fit_cycle_plugin_default(void);

/* Writes src's files as dir/NAME.{h,c} and NAME_io.c with the firmware
 * (tools/qat/firmware: startup, memory map, run_once.c) and input.inc
 * (input: samples × numel floats), builds dir/NAME-m4.elf, runs it and
 * reads dir/NAME.cycles: total gets the estimated cycles of NAME_run per
 * inference (the mean over the samples, rounded), op[j] those of op j of
 * the program and what it calls (0 for an op the generator fused into the
 * one before it), for j < n_ops. 0, or -1 with a one-line reason in why
 * (the compiler's and qemu's output in dir/cycles.log). */
int fit_cycles_measure(const fit_cycle_tools *t, const char *dir, const char *name, const qat_codegen_source *src,
                       const float *input, int samples, int64_t numel, int64_t *total, int64_t *op, int n_ops,
                       char *why, size_t len);

#endif
