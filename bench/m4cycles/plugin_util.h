/* What the qemu plugins of this folder (m4_cycles.c, insn_count.c) share:
 * their key=value arguments, and the list of the blocks they translate
 * (kept for the exit to free). Each plugin is one source built alone
 * (build.sh), so these are static functions. */
#ifndef QAT_PLUGIN_UTIL_H
#define QAT_PLUGIN_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* argv's key=value arguments: each key one of keys[0..n), its value copied
 * into values[i] (NULL when absent). 0, or -1 with a message on stderr
 * naming the plugin (who). */
static int plugin_args(const char *who, int argc, char **argv, const char *const *keys, int n, char **values) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        int k = 0;
        if (!eq) {
            fprintf(stderr, "%s: argument %s is not key=value\n", who, a);
            return -1;
        }
        while (k < n && !(strlen(keys[k]) == (size_t)(eq - a) && strncmp(a, keys[k], (size_t)(eq - a)) == 0)) k++;
        if (k == n) {
            fprintf(stderr, "%s: unknown argument %s (", who, a);
            for (int j = 0; j < n; j++) fprintf(stderr, "%s%s=", j ? ", " : "", keys[j]);
            fprintf(stderr, ")\n");
            return -1;
        }
        free(values[k]);
        values[k] = strdup(eq + 1);
    }
    return 0;
}

/* A growing list of translated blocks. */
typedef struct {
    void **items;
    size_t n, cap, lost; /* lost: blocks that could not be kept (out of memory): not counted */
} plugin_blocks;

/* A new zeroed block of size bytes, kept in l; NULL (and lost counted) when out of memory. */
static void *plugin_block(plugin_blocks *l, size_t size) {
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 4096;
        void **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return l->lost++, NULL;
        l->items = grown, l->cap = cap;
    }
    void *b = calloc(1, size);
    if (!b) return l->lost++, NULL;
    return l->items[l->n++] = b;
}

static void plugin_blocks_free(plugin_blocks *l) {
    for (size_t i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
}

#endif
