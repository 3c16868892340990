/* Arm semihosting (BKPT 0xAB on M-profile), the two calls the harness
 * needs: write a NUL-terminated string to the host's stdout, and exit
 * (qemu exits with status 0 for a normal exit, 1 otherwise). */
#ifndef QAT_MCU_SEMIHOST_H
#define QAT_MCU_SEMIHOST_H

static inline int sh_call(int op, const void *arg) {
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static inline void sh_write0(const char *s) { sh_call(0x04, s); } /* SYS_WRITE0 */

static inline void sh_exit(int ok) { /* SYS_EXIT: ADP_Stopped_ApplicationExit, or RunTimeErrorUnknown */
    sh_call(0x18, (const void *)(ok ? 0x20026 : 0x20023));
    for (;;) {
    }
}
#endif
