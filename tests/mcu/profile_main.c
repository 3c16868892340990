/* Instructions per op of a generated model on a Cortex-M under qemu: NAME.c
 * compiled with -finstrument-functions (its q_/qk_ helpers excluded, so
 * only the noinline opN and NAME_run are instrumented), and these hooks
 * read SysTick at each entry and exit, summing each function's ticks
 * (nested calls included, which for opN is only q_requant). Prints
 * "fn ADDRESS TICKS" per function over all inputs, then the calibration
 * (device_main.c's: a loop of known length), which profile.sh turns into
 * instructions per inference per op with the ELF's symbols. */
#include <stdint.h>

#include QAT_MODEL_HEADER
#include "inputs.inc"
#include "semihost.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN CAT(QAT_MODEL, _run)
#define OUT_SIZE CAT(QAT_MODEL_UP, _OUTPUT_SIZE)

#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)

#define NF 64
#define DEPTH 8
static void *fns[NF];
static uint32_t sums[NF], stack_t0[DEPTH];
static int nf, depth;
static int8_t out[OUT_SIZE];
static char line[96];

#define NOI __attribute__((no_instrument_function))
NOI static uint32_t elapsed(uint32_t t0, uint32_t t1) { return (t0 - t1) & 0xFFFFFFu; }

NOI void __cyg_profile_func_enter(void *fn, void *site);
NOI void __cyg_profile_func_exit(void *fn, void *site);
void __cyg_profile_func_enter(void *fn, void *site) {
    (void)fn, (void)site;
    if (depth < DEPTH) stack_t0[depth] = SYST_CVR;
    depth++;
}
void __cyg_profile_func_exit(void *fn, void *site) {
    uint32_t t1 = SYST_CVR;
    int i;
    (void)site;
    if (--depth >= DEPTH) return;
    for (i = 0; i < nf && fns[i] != fn; i++) {
    }
    if (i == nf && nf < NF) fns[nf++] = fn;
    if (i < NF) sums[i] += elapsed(stack_t0[depth], t1);
}

NOI static void put(const char *s, uint32_t v) {
    int at = 0, n = 0;
    char d[12];
    while (*s) line[at++] = *s++;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    while (n) line[at++] = d[--n];
    line[at++] = '\n', line[at] = '\0';
    sh_write0(line);
}

NOI __attribute__((noinline)) static void spin(uint32_t n) {
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

NOI int main(void) {
    int i;
    uint32_t t0;
    SYST_RVR = 0xFFFFFF;
    SYST_CVR = 0;
    SYST_CSR = 5;
    for (i = 0; i < QAT_N_INPUTS; i++) RUN(qat_inputs[i], out);
    for (i = 0; i < nf; i++) {
        put("fn ", (uint32_t)(uintptr_t)fns[i]);
        put("ticks ", sums[i]);
    }
    t0 = SYST_CVR;
    spin(1000000);
    put("calibration ", elapsed(t0, SYST_CVR));
    put("inputs ", QAT_N_INPUTS);
    return 0;
}
