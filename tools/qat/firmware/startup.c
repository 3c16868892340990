/* The smallest start for the MPS2 boards under qemu: a vector table (the
 * initial stack pointer and the reset handler; every fault ends the run),
 * .data copied from flash, .bss zeroed, main, then semihosting's exit; and
 * the cycle plugin's markers (firmware.h). No FPU is enabled: the code
 * under test is integer only. The microcontroller tests (tests/mcu) and
 * qat fit's cycle measurement (tools/qat/fit_cycles.c) start with it. */
#include <stdint.h>

#include "firmware.h"

extern uint32_t __data_load, __data_start, __data_end, __bss_start, __bss_end, __stack_top;
int main(void);

void reset_handler(void) {
    const uint32_t *src = &__data_load;
    for (uint32_t *d = &__data_start; d < &__data_end;) *d++ = *src++;
    for (uint32_t *d = &__bss_start; d < &__bss_end;) *d++ = 0;
    sh_exit(main() == 0);
}

__attribute__((noinline, used)) void qat_mark_begin(void) { __asm__ volatile("nop"); }
__attribute__((noinline, used)) void qat_mark_end(void) { __asm__ volatile("nop\n\tnop"); }

static void fault_handler(void) {
    sh_write0("harness: fault (hard fault, NMI or an unexpected exception)\n");
    sh_exit(0);
}

/* the initial stack pointer, then the handlers of the 15 system exceptions */
__attribute__((section(".vectors"), used)) static void *const vectors[16] = {
    &__stack_top, (void *)reset_handler, (void *)fault_handler, (void *)fault_handler, (void *)fault_handler,
    (void *)fault_handler, (void *)fault_handler, 0, 0, 0, 0, (void *)fault_handler, (void *)fault_handler, 0,
    (void *)fault_handler, (void *)fault_handler,
};
