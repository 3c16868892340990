/* A qemu TCG plugin that counts the instructions a guest runs between two
 * marker functions, for guests the Cortex-M4 pricing (m4_cycles.c) does
 * not model: the aarch64 builds, where speed under emulation means
 * nothing and the instruction count is the figure (docs/performance.md,
 * "aarch64").
 *
 *   qemu-aarch64 -plugin ./libinsncount.so,out=FILE[,begin=qat_mark_begin][,end=qat_mark_end] PROGRAM ...
 *
 * Counting starts after each run of `begin` (a function's symbol, as qemu
 * reads it from the ELF) and stops at the next entry to `end`; FILE gets
 * the number of regions and their instructions. At translation each block
 * is tagged (a marker's entry, or its instruction count); at run time a
 * callback per block adds the count while inside a region. Single-threaded
 * guests (the benchmark harness). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
    uint32_t insns;
    int marker; /* 1: begin's entry, 2: end's entry, 0 */
} block;

typedef struct {
    char *out, *begin, *end;
    block **blocks; /* every translated block (freed at exit) */
    size_t nblocks, cap, lost;
    int inside;
    uint64_t regions, insns;
} state;

static state S; /* a plugin's state lives as long as qemu: its callbacks take no context of ours */

static void on_exec(unsigned int vcpu, void *udata) {
    (void)vcpu;
    const block *b = udata;
    if (b->marker == 1) { /* begin: its own body is not counted */
        S.inside = 1, S.regions++;
        return;
    }
    if (b->marker == 2) {
        S.inside = 0;
        return;
    }
    if (S.inside) S.insns += b->insns;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    if (S.nblocks == S.cap) {
        const size_t cap = S.cap ? 2 * S.cap : 4096;
        block **grown = realloc(S.blocks, cap * sizeof *grown);
        if (!grown) { /* not counted: the figures would be wrong, so the output says so */
            S.lost++;
            return;
        }
        S.blocks = grown, S.cap = cap;
    }
    block *b = calloc(1, sizeof *b);
    if (!b) {
        S.lost++;
        return;
    }
    S.blocks[S.nblocks++] = b;
    b->insns = (uint32_t)qemu_plugin_tb_n_insns(tb);
    const char *sym = b->insns ? qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, 0)) : NULL;
    if (sym && strcmp(sym, S.begin) == 0) b->marker = 1;
    if (sym && strcmp(sym, S.end) == 0) b->marker = 2;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_qemu_exit(qemu_plugin_id_t id, void *p) {
    (void)id, (void)p;
    FILE *f = fopen(S.out, "w");
    if (f) {
        fprintf(f, "regions: %" PRIu64 "\ninstructions: %" PRIu64 "\n", S.regions, S.insns);
        if (S.lost) fprintf(f, "lost: %zu blocks not counted (out of memory): the figures are low\n", S.lost);
        fclose(f);
    } else {
        fprintf(stderr, "insncount: cannot write %s\n", S.out);
    }
    for (size_t i = 0; i < S.nblocks; i++) free(S.blocks[i]);
    free(S.blocks);
    free(S.out), free(S.begin), free(S.end);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!eq) {
            fprintf(stderr, "insncount: argument %s is not key=value\n", a);
            return -1;
        }
        const size_t k = (size_t)(eq - a);
        if (k == 3 && strncmp(a, "out", 3) == 0) S.out = strdup(eq + 1);
        else if (k == 5 && strncmp(a, "begin", 5) == 0) S.begin = strdup(eq + 1);
        else if (k == 3 && strncmp(a, "end", 3) == 0) S.end = strdup(eq + 1);
        else {
            fprintf(stderr, "insncount: unknown argument %s (out=, begin=, end=)\n", a);
            return -1;
        }
    }
    if (!S.out) {
        fprintf(stderr, "insncount: out=FILE is required\n");
        return -1;
    }
    if (!S.begin) S.begin = strdup("qat_mark_begin");
    if (!S.end) S.end = strdup("qat_mark_end");
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_qemu_exit, NULL);
    return 0;
}
