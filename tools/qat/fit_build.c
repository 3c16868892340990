/* qat fit's firmware check (fit_build.h): compile, link, measure. The
 * programs run without a shell, their output into DIR/build.log. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fit_build.h"

const char *const fit_cores[] = {"cortex-m4", "cortex-m0plus", "cortex-m3", "cortex-m7", "cortex-m33", NULL};

int fit_run_program(char *const argv[], const char *log, const char *out, unsigned seconds) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int lf = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int of = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : lf;
        if (lf < 0 || of < 0) _exit(126);
        dup2(of, 1), dup2(lf, 2);
        if (seconds) alarm(seconds); /* kept across exec: SIGALRM ends a run that hangs */
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* cc's size program: "gcc" at its end replaced by "size". */
static bool size_program(const char *cc, char *buf, size_t len) {
    size_t n = strlen(cc);
    if (n < 3 || strcmp(cc + n - 3, "gcc")) return false;
    return (size_t)snprintf(buf, len, "%.*ssize", (int)(n - 3), cc) < len;
}

bool fit_on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    char buf[4200];
    for (const char *s = path ? path : "/usr/bin:/bin"; *s;) {
        size_t n = strcspn(s, ":");
        if ((size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? s : ".", prog) < sizeof buf && access(buf, X_OK) == 0)
            return true;
        s += n + (s[n] == ':');
    }
    return false;
}

bool fit_toolchain_found(const char *cc, char *why, size_t len) {
    char size[4200];
    if (!fit_on_path(cc)) return snprintf(why, len, "no compiler %s (Debian: apt-get install gcc-arm-none-eabi "
                                      "libnewlib-arm-none-eabi)", cc), false;
    if (!size_program(cc, size, sizeof size) || !fit_on_path(size))
        return snprintf(why, len, "no size program beside %s (a name ending in gcc, its binutils' size next to it)", cc),
               false;
    return true;
}

/* The sections of `size -A` output: .text, .rodata and the writable ones. */
static int read_sizes(const char *path, fit_build *b) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512], name[256];
    long long size, addr;
    int seen = 0;
    b->code = b->constants = b->ram = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%255s %lld %lld", name, &size, &addr) == 3) {
            if (!strcmp(name, ".text") || !strcmp(name, ".ARM.exidx")) b->code += size, seen |= 1;
            else if (!strcmp(name, ".rodata")) b->constants += size, seen |= 2;
            else if (!strcmp(name, ".data") || !strcmp(name, ".bss") || !strcmp(name, ".persistent") ||
                     !strcmp(name, ".noinit"))
                b->ram += size;
        }
    fclose(f);
    return seen & 1 ? 0 : -1;
}

/* ---- the stack bound: GCC's call graph (-fcallgraph-info=su) ----------------------------- */

#define MAX_NODES 4096
#define MAX_EDGES 16384

typedef struct {
    char title[128];
    int64_t frame;       /* -1: a function without a frame size (the C library's) */
    bool dynamic;
    int state;           /* 0 unvisited, 1 on the path, 2 done */
    int64_t deepest;     /* this frame plus the deepest callee chain */
} node;

typedef struct {
    node *nodes;
    int n;
    int (*edges)[2];
    int ne;
    bool cyclic, dynamic;
} graph;

static int find(graph *g, const char *title) {
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->nodes[i].title, title)) return i;
    if (g->n == MAX_NODES) return -1;
    node *x = &g->nodes[g->n];
    memset(x, 0, sizeof *x);
    snprintf(x->title, sizeof x->title, "%s", title);
    x->frame = -1;
    return g->n++;
}

/* The text between `key: "` and the next quote. */
static bool quoted(const char *line, const char *key, char *out, size_t len) {
    const char *p = strstr(line, key);
    if (!p) return false;
    p += strlen(key);
    const char *q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= len) return false;
    memcpy(out, p, (size_t)(q - p)), out[q - p] = '\0';
    return true;
}

static int64_t deepest(graph *g, int v) {
    node *x = &g->nodes[v];
    if (x->state == 2) return x->deepest;
    if (x->state == 1) return g->cyclic = true, 0;
    x->state = 1;
    int64_t below = 0;
    for (int e = 0; e < g->ne; e++)
        if (g->edges[e][0] == v) {
            int64_t d = deepest(g, g->edges[e][1]);
            if (d > below) below = d;
        }
    if (x->dynamic) g->dynamic = true;
    x->deepest = (x->frame < 0 ? FIT_LIB_FRAME : x->frame) + below;
    x->state = 2;
    return x->deepest;
}

static int stack_bound(const char *ci, const char *entry, fit_build *b) {
    FILE *f = fopen(ci, "r");
    if (!f) return -1;
    graph g = {.nodes = calloc(MAX_NODES, sizeof(node)), .edges = calloc(MAX_EDGES, sizeof(int[2]))};
    char line[1024], a[128], c[128], label[512];
    int rc = g.nodes && g.edges ? 0 : -1;
    while (!rc && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "node:", 5) && quoted(line, "title: \"", a, sizeof a)) {
            int v = find(&g, a);
            if (v < 0) rc = -1;
            const char *bytes = quoted(line, "label: \"", label, sizeof label) ? strstr(label, "\\n") : NULL;
            bytes = bytes ? strstr(bytes + 2, "\\n") : NULL;
            long long fb;
            if (!rc && bytes && sscanf(bytes + 2, "%lld bytes", &fb) == 1) {
                g.nodes[v].frame = fb;
                g.nodes[v].dynamic = strstr(bytes, "(static)") == NULL;
            }
        } else if (!strncmp(line, "edge:", 5) && quoted(line, "sourcename: \"", a, sizeof a) &&
                   quoted(line, "targetname: \"", c, sizeof c)) {
            int s = find(&g, a), t = find(&g, c);
            if (s < 0 || t < 0 || g.ne == MAX_EDGES) rc = -1;
            else g.edges[g.ne][0] = s, g.edges[g.ne][1] = t, g.ne++;
        }
    }
    fclose(f);
    int root = -1;
    for (int i = 0; !rc && i < g.n; i++)
        if (!strcmp(g.nodes[i].title, entry)) root = i;
    if (!rc && root >= 0) {
        b->stack = deepest(&g, root);
        b->stack_bounded = !g.cyclic && !g.dynamic;
    }
    free(g.nodes), free(g.edges);
    return !rc && root >= 0 ? 0 : -1;
}

int fit_build_c(const char *dir, const char *name, const char *core, const char *cc, fit_build *out, char *why,
                size_t len) {
    char src[4200], obj[4200], elf[4200], ci[4200], log[4200], sizes[4200], mcpu[64], entry[160], size[4200];
    snprintf(src, sizeof src, "%s/%s.c", dir, name);
    snprintf(obj, sizeof obj, "%s/%s.o", dir, name);
    snprintf(elf, sizeof elf, "%s/%s.elf", dir, name);
    snprintf(ci, sizeof ci, "%s/%s.ci", dir, name);
    snprintf(log, sizeof log, "%s/build.log", dir);
    snprintf(sizes, sizeof sizes, "%s/%s.sizes", dir, name);
    snprintf(mcpu, sizeof mcpu, "-mcpu=%s", core);
    snprintf(entry, sizeof entry, "-Wl,--entry=%s_run", name);
    if (!size_program(cc, size, sizeof size)) return snprintf(why, len, "%s: not a gcc", cc), -1;
    remove(log);
    char *compile[] = {(char *)cc, mcpu, "-mthumb", "-O2", "-std=c99", "-ffunction-sections", "-fdata-sections",
                       "-fcallgraph-info=su", "-c", src, "-o", obj, NULL};
    char *link[] = {(char *)cc, mcpu, "-mthumb", "-nostartfiles", "--specs=nano.specs", "-Wl,--gc-sections", entry,
                    obj, "-o", elf, NULL};
    char *measure[] = {size, "-A", elf, NULL};
    if (fit_run_program(compile, log, NULL, 0) != 0) return snprintf(why, len, "%s could not compile %s (see %s)", cc, src, log), -1;
    if (fit_run_program(link, log, NULL, 0) != 0) return snprintf(why, len, "%s could not link %s (see %s)", cc, obj, log), -1;
    if (fit_run_program(measure, log, sizes, 0) != 0 || read_sizes(sizes, out) != 0)
        return snprintf(why, len, "%s -A %s: no section sizes (see %s)", size, elf, log), -1;
    char root[160];
    snprintf(root, sizeof root, "%s_run", name);
    if (stack_bound(ci, root, out) != 0) return snprintf(why, len, "%s: no call graph from %s", ci, root), -1;
    return 0;
}
