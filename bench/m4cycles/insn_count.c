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

#include "plugin_util.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
    uint32_t insns;
    int marker; /* 1: begin's entry, 2: end's entry, 0 */
} block;

typedef struct {
    char *args[3]; /* out, begin, end */
    plugin_blocks blocks; /* every translated block (freed at exit) */
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
    block *b = plugin_block(&S.blocks, sizeof *b); /* NULL: not counted, and the output says so */
    if (!b) return;
    b->insns = (uint32_t)qemu_plugin_tb_n_insns(tb);
    const char *sym = b->insns ? qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, 0)) : NULL;
    if (sym && strcmp(sym, S.args[1]) == 0) b->marker = 1;
    if (sym && strcmp(sym, S.args[2]) == 0) b->marker = 2;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_qemu_exit(qemu_plugin_id_t id, void *p) {
    (void)id, (void)p;
    FILE *f = fopen(S.args[0], "w");
    if (f) {
        fprintf(f, "regions: %" PRIu64 "\ninstructions: %" PRIu64 "\n", S.regions, S.insns);
        if (S.blocks.lost) fprintf(f, "lost: %zu blocks not counted (out of memory): the figures are low\n", S.blocks.lost);
        fclose(f);
    } else {
        fprintf(stderr, "insncount: cannot write %s\n", S.args[0]);
    }
    plugin_blocks_free(&S.blocks);
    for (int i = 0; i < 3; i++) free(S.args[i]);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    static const char *const keys[] = {"out", "begin", "end"};
    if (plugin_args("insncount", argc, argv, keys, 3, S.args) != 0) return -1;
    if (!S.args[0]) {
        fprintf(stderr, "insncount: out=FILE is required\n");
        return -1;
    }
    if (!S.args[1]) S.args[1] = strdup("qat_mark_begin");
    if (!S.args[2]) S.args[2] = strdup("qat_mark_end");
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_qemu_exit, NULL);
    return 0;
}
