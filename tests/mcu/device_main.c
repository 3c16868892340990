/* Runs a generated model on a Cortex-M under qemu (mps2-an385/an386):
 * every input of inputs.inc (quantized on the host by the model's own
 * NAME_quantize_input), the output integers printed through semihosting
 * in host_main.c's format ("i: v0 v1 ..."), then three measurements:
 *   stack: the deepest the stack went during the model's calls (the stack
 *          painted before the first call, scanned after the last);
 *   calibration: SysTick ticks over a loop of known length (2 instructions
 *          an iteration), which gives the instructions per tick under
 *          qemu's -icount shift=0 (one instruction = 1 ns of virtual time);
 *   instructions: SysTick ticks around each inference, times that ratio.
 * Each inference is also bracketed by qat_mark_begin/qat_mark_end, where
 * the cycle-pricing qemu plugin (bench/m4cycles) starts and stops.
 * Nothing is printed between painting and scanning: the printing code's
 * own frames would count as the model's. With -DQAT_INPUT_U8, inputs.inc
 * holds raw bytes, quantized on the device by NAME_quantize_input_u8 (the
 * table in flash, no float) before each run, inside the measurement.
 *   -DQAT_MODEL=lenet -DQAT_MODEL_UP=LENET -DQAT_MODEL_HEADER='"lenet.h"' */
#include <stdint.h>

#include QAT_MODEL_HEADER
#include "inputs.inc" /* QAT_N_INPUTS, qat_inputs[QAT_N_INPUTS][input size] */
#include "firmware.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN CAT(QAT_MODEL, _run)
#define IN_SIZE CAT(QAT_MODEL_UP, _INPUT_SIZE)
#define OUT_SIZE CAT(QAT_MODEL_UP, _OUTPUT_SIZE)

#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)
#define PAINT 0xA5A5A5A5u

static int8_t outputs[QAT_N_INPUTS][OUT_SIZE];
static uint32_t ticks[QAT_N_INPUTS];

static char line[64 + 8 * OUT_SIZE];
static int at;

static void put_str(const char *s) {
    while (*s) line[at++] = *s++;
}

static void put_int(long v) {
    char d[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    if (v < 0) line[at++] = '-';
    do d[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
    while (n) line[at++] = d[--n];
}

static void flush(void) {
    line[at++] = '\n';
    line[at] = '\0';
    sh_write0(line);
    at = 0;
}

/* SysTick counts down from 2^24 - 1 and wraps: elapsed ticks of an
 * interval shorter than one wrap. */
static uint32_t elapsed(uint32_t t0, uint32_t t1) { return (t0 - t1) & 0xFFFFFFu; }

__attribute__((noinline)) static void spin(uint32_t n) {
    __asm__ volatile(".syntax unified\n1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

int main(void) {
    SYST_RVR = 0xFFFFFF;
    SYST_CVR = 0;
    SYST_CSR = 5; /* enabled, processor clock, no interrupt */
    uint32_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile uint32_t *p = &__stack_limit; p < (uint32_t *)sp; p++) *p = PAINT;
    int rc = 0;
    for (int i = 0; i < QAT_N_INPUTS; i++) {
        qat_mark_begin(); /* outside the SysTick window, which keeps its figures */
        uint32_t t0 = SYST_CVR;
#ifdef QAT_INPUT_U8
        static int8_t q[IN_SIZE];
        CAT(QAT_MODEL, _quantize_input_u8)(qat_inputs[i], q);
        rc |= RUN(q, outputs[i]);
#else
        rc |= RUN(qat_inputs[i], outputs[i]);
#endif
        ticks[i] = elapsed(t0, SYST_CVR);
        qat_mark_end();
    }
    const uint32_t *low = &__stack_limit;
    while (low < (uint32_t *)sp && *low == PAINT) low++;
    uint32_t t0 = SYST_CVR, t1 = SYST_CVR, overhead = elapsed(t0, t1);
    enum { LOOP = 1000000 };
    t0 = SYST_CVR;
    spin(LOOP);
    uint32_t loop_ticks = elapsed(t0, SYST_CVR);
    for (int i = 0; i < QAT_N_INPUTS; i++) {
        put_int(i), put_str(":");
        for (int k = 0; k < OUT_SIZE; k++) put_str(" "), put_int(outputs[i][k]);
        flush();
    }
    unsigned long long total = 0;
    uint32_t lo = 0xFFFFFFFFu, hi = 0;
    for (int i = 0; i < QAT_N_INPUTS; i++) {
        total += ticks[i];
        lo = ticks[i] < lo ? ticks[i] : lo;
        hi = ticks[i] > hi ? ticks[i] : hi;
    }
    put_str("stack: "), put_int((long)(sp - (uint32_t)low)), put_str(" bytes"), flush();
    put_str("calibration: "), put_int(2L * LOOP), put_str(" instructions in "), put_int((long)loop_ticks),
        put_str(" ticks (timer read overhead "), put_int((long)overhead), put_str(" ticks)"), flush();
    put_str("ticks: total "), put_int((long)total), put_str(" min "), put_int((long)lo), put_str(" max "),
        put_int((long)hi), put_str(" over "), put_int(QAT_N_INPUTS), put_str(" inferences"), flush();
    put_str(rc ? "run: failed" : "run: ok"), flush();
    return rc;
}
