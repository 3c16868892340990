/* The cycle-pricing plugin (bench/m4cycles) on code whose Cortex-M4 cost is
 * worked out by hand from the timing table of docs/cycle-model.md: each
 * line of the region below carries its cycles; the totals are printed
 * for tests/mcu/cycles_check.sh to compare with what the plugin reports.
 * The region is assembly so that the compiler cannot change what is
 * priced; the markers are the firmware's (tools/qat/firmware/startup.c). */
#include <stdint.h>

#include "firmware.h"

/* the expected figures (the sums of the comments below) */
#define EXPECT_INSNS (601 + 24)
#define EXPECT_CYCLES (899 + 58)
#define EXPECT_TAKEN (99 + 5)

__attribute__((naked, noinline)) static void priced(void) {
    __asm__ volatile(
        ".syntax unified\n\t"
        "push {r4-r7, lr}\n\t"
        "sub sp, #16\n\t"
        "bl qat_mark_begin\n\t"
        /* block A: 6 instructions, 1+2+1+1+1+1 = 7 cycles (the first load
         * follows a move: 2; the second follows a load: 1) */
        "movs r0, #100\n\t"
        "1:\n\t"
        "ldr r1, [sp]\n\t"
        "ldr r2, [sp, #4]\n\t"
        "smlad r3, r1, r2, r3\n\t"
        "str r3, [sp, #8]\n\t"
        "subs r0, #1\n\t"
        "bne 1b\n\t"
        /* the loop: 1 + 6 * 100 = 601 instructions, 1 + 7 * 100 = 701
         * cycles (each pass starts a block: its first load costs 2), and 99
         * taken branches at 2 more: 899 cycles */
        "push {r4, r5}\n\t"         /* 1 + 2 = 3 */
        "pop {r4, r5}\n\t"          /* 3 */
        "ldrd r0, r1, [sp]\n\t"     /* 3 */
        "strd r0, r1, [sp, #8]\n\t" /* 3 */
        "mov r6, sp\n\t"            /* 1 */
        "ldm r6!, {r0, r1, r2}\n\t" /* 1 + 3 = 4 */
        "movs r1, #0\n\t"           /* 1 */
        "str r0, [r6, r1]\n\t"      /* register offset: 2 */
        "mul r0, r1, r2\n\t"        /* 1 */
        "movs r2, #3\n\t"           /* 1 */
        "sdiv r0, r1, r2\n\t"       /* 12 */
        "cmp r0, #0\n\t"            /* 1 */
        "it eq\n\t"                 /* 1 */
        "moveq r0, #1\n\t"          /* 1 */
        "movs r0, #0\n\t"           /* 1 */
        "cbz r0, 2f\n\t"            /* taken: 1 + 2 */
        "nop\n\t"                   /* skipped */
        "2:\n\t"
        "cbnz r0, 3f\n\t"           /* not taken: 1 */
        "bl leaf\n\t"               /* 1 + 2, and the leaf's BX LR 1 + 2 */
        "ldr r0, =0x12345678\n\t"   /* literal: 2 */
        "cmp r0, #0\n\t"            /* 1 */
        "beq.w 3f\n\t"              /* not taken: 1 */
        "b.w 3f\n\t"                /* taken: 1 + 2 */
        ".ltorg\n\t"
        "3:\n\t"
        /* after the loop: 24 instructions with the BL below (the skipped
         * nop is not run); cycles 3+3+3+3+1+4+1+2+1+1+12+1+1+1+1+1 (to the
         * CBZ) + 1+1+1+2+1+1+1+1 (CBNZ to the BL below) = 48, and 5 taken
         * branches (CBZ, BL, BX, B.W, the BL below) at 2 more: 58 cycles */
        "bl qat_mark_end\n\t" /* 1 + 2: its refill is charged to the region */
        "add sp, #16\n\t"
        "pop {r4-r7, pc}\n\t");
}

__attribute__((naked, noinline, used)) void leaf(void) { __asm__ volatile("bx lr"); }

static char line[96];

static void put(const char *s, long v) {
    int at = 0;
    while (*s) line[at++] = *s++;
    char d[24];
    int n = 0;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    while (n) line[at++] = d[--n];
    line[at++] = '\n';
    line[at] = '\0';
    sh_write0(line);
}

int main(void) {
    priced();
    put("expected instructions: ", EXPECT_INSNS);
    put("expected cycles: ", EXPECT_CYCLES);
    put("expected taken branches: ", EXPECT_TAKEN);
    return 0;
}
