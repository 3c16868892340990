/* A qemu-system-arm TCG plugin that prices what a Cortex-M4 guest runs,
 * instruction by instruction, with the Cortex-M4's timings (m4_timing.h,
 * docs/cycle-model.md), between two marker functions of the guest:
 *
 *   qemu-system-arm -M mps2-an386 ... -plugin ./libm4cycles.so,out=FILE
 *     [,begin=qat_mark_begin][,end=qat_mark_end][,top=20][,group=op]
 *
 * Counting starts after each run of `begin` (a function's symbol, as qemu
 * reads it from the ELF) and stops at the next entry to `end`; FILE gets
 * the number of regions, their instructions, estimated cycles, taken
 * branches, and the `top` functions by cycles (each function's own
 * instructions). With group=PREFIX, also each function whose name starts
 * with PREFIX inclusively (the generated ops, opN: what runs from its
 * entry until the next such entry or a return to a function whose name
 * ends in _run, the helpers it calls included), in the order first run.
 *
 * How: at translation each block's straight-line cost is summed once
 * (a load right after a load is pipelined within the block); at run time a
 * callback per block adds it, and adds the refill P to the previous block
 * when its last instruction was a branch that was taken: always for an
 * unconditional one, and for a conditional one when this block does not
 * start where the previous one ended. Single vCPU (the MPS2 boards). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#include "m4_timing.h"
#include "plugin_util.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { MAX_FUNCS = 4096 };

typedef struct {
    uint64_t start, end; /* guest addresses: first byte, one past the last */
    uint32_t insns, cycles;
    uint8_t branch; /* m4_branch of the last instruction */
    int func;       /* index into funcs, -1 unknown */
    int marker;     /* 1: begin's entry, 2: end's entry, 0 */
} block;

typedef struct {
    char *name;
    uint64_t insns, cycles;    /* its own instructions */
    uint64_t g_insns, g_cycles; /* as a group: with what it calls (group=) */
    int64_t first;             /* when it first ran as a group (order), -1 never */
} func_total;

typedef struct {
    char *out, *begin, *end, *group;
    int top;
    int current;       /* the group now running (group=), -1 none */
    int64_t groups_seen;
    plugin_blocks blocks; /* every translated block (freed at exit) */
    func_total funcs[MAX_FUNCS];
    int nfuncs;
    int inside;
    const block *prev; /* the last counted block, whose branch is pending */
    uint64_t regions, insns, cycles, taken, refill_cycles;
} state;

static state S; /* a plugin's state lives as long as qemu: its callbacks take no context of ours */

static int func_index(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < S.nfuncs; i++)
        if (strcmp(S.funcs[i].name, name) == 0) return i;
    if (S.nfuncs == MAX_FUNCS) return -1;
    S.funcs[S.nfuncs].name = strdup(name);
    if (!S.funcs[S.nfuncs].name) return -1;
    S.funcs[S.nfuncs].first = -1;
    return S.nfuncs++;
}

static void charge(const block *b, uint64_t insns, uint64_t cycles) {
    S.insns += insns, S.cycles += cycles;
    if (b->func >= 0) S.funcs[b->func].insns += insns, S.funcs[b->func].cycles += cycles;
    if (S.current >= 0) S.funcs[S.current].g_insns += insns, S.funcs[S.current].g_cycles += cycles;
}

/* A block of a group's function makes it the current group; one of a
 * function ending in _run (the caller of the ops) ends it. */
static void follow_group(const block *b) {
    if (!S.group || b->func < 0) return;
    func_total *f = &S.funcs[b->func];
    if (strncmp(f->name, S.group, strlen(S.group)) == 0) {
        S.current = b->func;
        if (f->first < 0) f->first = S.groups_seen++;
    } else {
        size_t n = strlen(f->name);
        if (n >= 4 && strcmp(f->name + n - 4, "_run") == 0) S.current = -1;
    }
}

static void on_exec(unsigned int vcpu, void *udata) {
    (void)vcpu;
    const block *b = udata;
    if (S.inside && S.prev) { /* the previous block's branch, now that its outcome is known */
        const block *p = S.prev;
        if (p->branch == M4_ALWAYS_BRANCH || (p->branch == M4_COND_BRANCH && b->start != p->end)) {
            charge(p, 0, M4_REFILL);
            S.taken++, S.refill_cycles += M4_REFILL;
        }
    }
    S.prev = NULL;
    if (b->marker == 1) { /* begin: its own body is not counted */
        S.inside = 1, S.regions++;
        return;
    }
    if (b->marker == 2) {
        S.inside = 0;
        return;
    }
    if (!S.inside) return;
    follow_group(b);
    charge(b, b->insns, b->cycles);
    S.prev = b;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    const size_t n = qemu_plugin_tb_n_insns(tb);
    block *b = plugin_block(&S.blocks, sizeof *b); /* NULL: not priced, and the output says so */
    if (!b) return;
    b->start = qemu_plugin_tb_vaddr(tb);
    b->end = b->start;
    b->func = -1;
    int after_load = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint8_t *p = qemu_plugin_insn_data(insn);
        const size_t size = qemu_plugin_insn_size(insn);
        const uint32_t hw1 = (uint32_t)p[0] | (uint32_t)p[1] << 8;
        const uint32_t hw2 = size >= 4 ? ((uint32_t)p[2] | (uint32_t)p[3] << 8) : 0;
        const m4_insn d = m4_decode(hw1, hw2);
        if (i == 0) {
            const char *sym = qemu_plugin_insn_symbol(insn);
            b->func = func_index(sym);
            if (sym && strcmp(sym, S.begin) == 0) b->marker = 1;
            if (sym && strcmp(sym, S.end) == 0) b->marker = 2; /* a marker is one block: NOP, BX LR */
        }
        b->insns++;
        b->cycles += (uint32_t)m4_base_cycles(d, after_load);
        after_load = d.cls == M4_LOAD;
        b->branch = d.branch;
        b->end = qemu_plugin_insn_vaddr(insn) + size;
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static int by_cycles(const void *a, const void *b) {
    const func_total *x = a, *y = b;
    return x->cycles < y->cycles ? 1 : x->cycles > y->cycles ? -1 : 0;
}

static int by_first(const void *a, const void *b) {
    const func_total *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first ? 1 : 0;
}

static void at_qemu_exit(qemu_plugin_id_t id, void *udata) {
    (void)id, (void)udata;
    FILE *f = fopen(S.out, "w");
    if (f && S.blocks.lost) fprintf(f, "error: out of memory: %zu blocks were not priced\n", S.blocks.lost);
    if (f) {
        fprintf(f, "regions: %" PRIu64 "\n", S.regions);
        fprintf(f, "instructions: %" PRIu64 "\n", S.insns);
        fprintf(f, "cycles: %" PRIu64 "\n", S.cycles);
        fprintf(f, "taken branches: %" PRIu64 " (refill P = %d cycles each, %" PRIu64 " cycles)\n", S.taken,
                M4_REFILL, S.refill_cycles);
        qsort(S.funcs, (size_t)S.nfuncs, sizeof S.funcs[0], by_cycles);
        for (int i = 0; i < S.nfuncs && i < S.top; i++) {
            if (!S.funcs[i].cycles) break;
            fprintf(f, "function: %s %" PRIu64 " cycles %" PRIu64 " instructions\n", S.funcs[i].name,
                    S.funcs[i].cycles, S.funcs[i].insns);
        }
        qsort(S.funcs, (size_t)S.nfuncs, sizeof S.funcs[0], by_first);
        for (int i = 0; i < S.nfuncs; i++)
            if (S.funcs[i].first >= 0)
                fprintf(f, "group: %s %" PRIu64 " cycles %" PRIu64 " instructions\n", S.funcs[i].name,
                        S.funcs[i].g_cycles, S.funcs[i].g_insns);
        if (fclose(f) != 0) fprintf(stderr, "m4cycles: writing %s failed\n", S.out);
    } else {
        fprintf(stderr, "m4cycles: cannot write %s\n", S.out);
    }
    for (int i = 0; i < S.nfuncs; i++) free(S.funcs[i].name);
    plugin_blocks_free(&S.blocks);
    free(S.out), free(S.begin), free(S.end), free(S.group);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    if (strcmp(info->target_name, "arm") != 0) {
        fprintf(stderr, "m4cycles: prices Arm (Thumb) guests only, not %s\n", info->target_name);
        return -1;
    }
    S.current = -1;
    static const char *const keys[] = {"out", "begin", "end", "top", "group"};
    char *v[5] = {NULL};
    if (plugin_args("m4cycles", argc, argv, keys, 5, v) != 0) return -1;
    S.out = v[0], S.begin = v[1], S.end = v[2], S.group = v[4];
    S.top = v[3] ? atoi(v[3]) : 20;
    free(v[3]);
    if (!S.out) {
        fprintf(stderr, "m4cycles: out=FILE is required\n");
        return -1;
    }
    if (!S.begin) S.begin = strdup("qat_mark_begin");
    if (!S.end) S.end = strdup("qat_mark_end");
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_qemu_exit, NULL);
    return 0;
}
