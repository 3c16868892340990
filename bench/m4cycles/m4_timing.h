/* The Cortex-M4's cycle cost of one Thumb instruction, from its encoding:
 * the timings of the Cortex-M4 Technical Reference Manual (ARM DDI 0439,
 * "Instruction set summary" and "Load/store timings"), with zero-wait-state
 * memory. docs/cycle-model.md gives the table, what it leaves out and in
 * which direction that errs. Shared by the qemu plugin (m4_cycles.c) and
 * its test; no qemu type appears here.
 *
 * The cost has two parts: `base`, paid whenever the instruction runs, and
 * the pipeline refill P, paid when it changes the PC (a taken branch, a
 * load or pop into the PC). m4_insn says which kind of branch it is; the
 * caller decides "taken" (an unconditional one always is). */
#ifndef QAT_M4_TIMING_H
#define QAT_M4_TIMING_H

#include <stdint.h>

#define M4_REFILL 2 /* P: the TRM gives 1 to 3 cycles (target alignment and width); 2 is the middle */

typedef enum {
    M4_OTHER,      /* data processing, multiply, DSP, IT, hints: 1 cycle */
    M4_LOAD,       /* single load: 2, 1 right after another single load */
    M4_STORE,      /* single store, immediate offset: 1 (the write buffer) */
    M4_STORE_REG,  /* single store, register offset: 2, 1 right after a single load */
    M4_MULTIPLE,   /* LDM/STM/PUSH/POP/LDRD/STRD: 1 + registers */
    M4_DIVIDE,     /* SDIV/UDIV: 2 to 12 by the operands; priced 12 */
    M4_TABLE,      /* TBB/TBH: 2 (load) + 1 (add), then P */
} m4_class;

typedef enum {
    M4_NO_BRANCH,
    M4_COND_BRANCH,   /* B<cond>, CBZ, CBNZ: P only when taken */
    M4_ALWAYS_BRANCH, /* B, BL, BX, BLX, POP/LDM/LDR into the PC, MOV/ADD to the PC, TBB/TBH */
} m4_branch;

typedef struct {
    uint8_t size;     /* 2 or 4 bytes */
    uint8_t cls;      /* m4_class */
    uint8_t branch;   /* m4_branch */
    uint8_t regs;     /* registers moved by M4_MULTIPLE */
} m4_insn;

static inline int m4_popcount16(uint32_t v) {
    int n = 0;
    for (v &= 0xFFFFu; v; v &= v - 1) n++;
    return n;
}

/* hw1: the first halfword; hw2: the second (ignored for 16-bit ones). */
static inline m4_insn m4_decode(uint32_t hw1, uint32_t hw2) {
    m4_insn d = {2, M4_OTHER, M4_NO_BRANCH, 0};
    const uint32_t top5 = hw1 >> 11;
    if (top5 == 0x1D || top5 == 0x1E || top5 == 0x1F) { /* 32-bit Thumb-2 */
        const uint32_t op1 = (hw1 >> 11) & 3, op2 = (hw1 >> 4) & 0x7F;
        d.size = 4;
        if (op1 == 1) {
            if ((op2 & 0x64) == 0x00) { /* load/store multiple */
                d.cls = M4_MULTIPLE;
                d.regs = (uint8_t)m4_popcount16(hw2);
                if ((hw1 & 0x10) && (hw2 & 0x8000)) d.branch = M4_ALWAYS_BRANCH; /* LDM with PC */
            } else if ((op2 & 0x64) == 0x04) { /* dual, exclusive, table branch: hw1[8:7] and hw1[5] */
                const uint32_t a = (hw1 >> 7) & 3, b = (hw1 >> 5) & 1;
                if (a == 1 && b == 0 && ((hw2 >> 4) & 0xE) == 0) {
                    d.cls = M4_TABLE, d.branch = M4_ALWAYS_BRANCH; /* TBB, TBH */
                } else if (a <= 1 && b == 0) {
                    d.cls = M4_LOAD; /* LDREX/STREX and their byte/halfword forms: as a single load */
                } else {
                    d.cls = M4_MULTIPLE, d.regs = 2; /* LDRD, STRD */
                }
            }
        } else if (op1 == 2) {
            if (hw2 & 0x8000) { /* branches and miscellaneous control */
                const uint32_t bop = (hw2 >> 12) & 7;
                if ((bop & 5) == 0) { /* B<cond>.W, or MSR/MRS/hints when cond is 111x */
                    if (((hw1 >> 7) & 7) != 7) d.branch = M4_COND_BRANCH;
                } else {
                    d.branch = M4_ALWAYS_BRANCH; /* B.W, BL */
                }
            }
        } else {                       /* op1 == 3 */
            if ((op2 & 0x71) == 0x00) { /* store single data item */
                const int reg_offset = !(hw1 & 0x80) && !(hw2 & 0x800);
                d.cls = reg_offset ? M4_STORE_REG : M4_STORE;
            } else if ((op2 & 0x67) == 0x01 || (op2 & 0x67) == 0x03 || (op2 & 0x67) == 0x05) { /* loads */
                const uint32_t rt = hw2 >> 12;
                if (rt == 15 && (op2 & 0x67) != 0x05) {
                    d.cls = M4_OTHER; /* PLD/PLI: a hint */
                } else {
                    d.cls = M4_LOAD;
                    if (rt == 15) d.branch = M4_ALWAYS_BRANCH; /* LDR PC */
                }
            } else if ((op2 & 0x78) == 0x38 && ((op2 & 7) == 1 || (op2 & 7) == 3) && ((hw2 >> 4) & 0xF) == 0xF) {
                d.cls = M4_DIVIDE; /* SDIV 0111001, UDIV 0111011 */
            }
        }
        return d;
    }
    /* 16-bit Thumb */
    const uint32_t op6 = hw1 >> 10;
    if (op6 == 0x11) { /* special data processing, branch and exchange */
        const uint32_t op = (hw1 >> 8) & 3, rd = ((hw1 >> 4) & 8) | (hw1 & 7);
        if (op == 3 || ((op == 0 || op == 2) && rd == 15)) d.branch = M4_ALWAYS_BRANCH;
    } else if ((op6 & 0x3E) == 0x12) { /* LDR literal */
        d.cls = M4_LOAD;
    } else if ((op6 & 0x3C) == 0x14) { /* load/store, register offset */
        const uint32_t opb = (hw1 >> 9) & 7;
        d.cls = opb <= 2 ? M4_STORE_REG : M4_LOAD;
    } else if ((op6 & 0x38) == 0x18 || (op6 & 0x3C) == 0x20 || (op6 & 0x3C) == 0x24) { /* imm / SP-relative */
        d.cls = (hw1 & 0x800) ? M4_LOAD : M4_STORE;
    } else if ((op6 & 0x3C) == 0x2C) { /* miscellaneous */
        const uint32_t op = (hw1 >> 8) & 0xF;
        if (op == 4 || op == 5 || op == 0xC || op == 0xD) { /* PUSH, POP */
            d.cls = M4_MULTIPLE;
            d.regs = (uint8_t)(m4_popcount16(hw1 & 0xFF) + ((hw1 >> 8) & 1));
            if (op == 0xD) d.branch = M4_ALWAYS_BRANCH;
        } else if ((op & 5) == 1) { /* CBZ, CBNZ */
            d.branch = M4_COND_BRANCH;
        }
    } else if ((op6 & 0x3C) == 0x30) { /* STM, LDM */
        d.cls = M4_MULTIPLE;
        d.regs = (uint8_t)m4_popcount16(hw1 & 0xFF);
    } else if ((op6 & 0x3C) == 0x34) { /* B<cond>, SVC, UDF */
        const uint32_t cond = (hw1 >> 8) & 0xF;
        if (cond < 14) d.branch = M4_COND_BRANCH;
    } else if ((op6 & 0x3E) == 0x38) { /* B */
        d.branch = M4_ALWAYS_BRANCH;
    }
    return d;
}

/* Cycles of an instruction before any refill; after_load: the previous
 * instruction, in the same straight-line run, was a single load. */
static inline int m4_base_cycles(m4_insn d, int after_load) {
    switch ((m4_class)d.cls) {
    case M4_LOAD: return after_load ? 1 : 2;
    case M4_STORE: return 1;
    case M4_STORE_REG: return after_load ? 1 : 2;
    case M4_MULTIPLE: return 1 + d.regs;
    case M4_DIVIDE: return 12;
    case M4_TABLE: return 3;
    case M4_OTHER: break;
    }
    return 1;
}

#endif
