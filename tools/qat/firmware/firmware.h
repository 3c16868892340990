/* What startup.c gives the programs it starts on qemu's MPS2 boards,
 * beside main: the markers where the cycle-pricing qemu plugin
 * (bench/m4cycles) starts and stops counting, each a function of its own
 * (never inlined, with different bodies so that the linker cannot fold
 * them into one address), and the bottom of the stack region
 * (mps2-sections.ld), for a harness that measures how deep a call went. */
#ifndef QAT_FIRMWARE_H
#define QAT_FIRMWARE_H

#include <stdint.h>

#include "semihost.h"

void qat_mark_begin(void);
void qat_mark_end(void);

extern uint32_t __stack_limit;

#endif
