/* qat fit's cycle measurement (fit_cycles.h): the firmware's files are
 * the tool's own (tools/qat/firmware, embedded at build time), written
 * beside the generated C and built with it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit_build.h"
#include "fit_cycles.h"

/* tools/qat/firmware, embedded (CMake: cmake/embed_text.cmake) */
extern const unsigned char fit_fw_startup_c[], fit_fw_firmware_h[], fit_fw_semihost_h[], fit_fw_mps2_ld[],
    fit_fw_mps2_sections_ld[], fit_fw_run_once_c[];
extern const unsigned long fit_fw_startup_c_len, fit_fw_firmware_h_len, fit_fw_semihost_h_len, fit_fw_mps2_ld_len,
    fit_fw_mps2_sections_ld_len, fit_fw_run_once_c_len;

static const struct {
    const char *name;
    const unsigned char *text;
    const unsigned long *len;
} firmware[] = {
    {"startup.c", fit_fw_startup_c, &fit_fw_startup_c_len},
    {"firmware.h", fit_fw_firmware_h, &fit_fw_firmware_h_len},
    {"semihost.h", fit_fw_semihost_h, &fit_fw_semihost_h_len},
    {"mps2.ld", fit_fw_mps2_ld, &fit_fw_mps2_ld_len},
    {"mps2-sections.ld", fit_fw_mps2_sections_ld, &fit_fw_mps2_sections_ld_len},
    {"run_once.c", fit_fw_run_once_c, &fit_fw_run_once_c_len},
};

#define RUN_SECONDS 600 /* a model that faults or loops must not hang the fit */

const char *fit_cycle_plugin_default(void) {
    const char *env = getenv("QAT_M4CYCLES_PLUGIN");
    if (env && *env) return env;
#ifdef QAT_M4CYCLES_PLUGIN_BUILT
    return QAT_M4CYCLES_PLUGIN_BUILT;
#else
    return "";
#endif
}

bool fit_cycle_tools_found(const fit_cycle_tools *t, char *why, size_t len) {
    if (!fit_on_path(t->qemu))
        return snprintf(why, len, "no %s (Debian: apt-get install qemu-system-arm; scripts/setup-mcu.sh)", t->qemu), false;
    if (!t->plugin || !*t->plugin)
        return snprintf(why, len, "no cycle plugin: build it (bash bench/m4cycles/build.sh libm4cycles.so) and give "
                        "--cycle-plugin PATH or QAT_M4CYCLES_PLUGIN"), false;
    if (access(t->plugin, R_OK) != 0)
        return snprintf(why, len, "--cycle-plugin %s: cannot read it (bash bench/m4cycles/build.sh %s builds it)",
                        t->plugin, t->plugin), false;
    return true;
}

static bool write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return false;
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return !fclose(f) && ok;
}

/* input.inc: the samples' floats, exactly (hexadecimal literals). */
static bool write_input(const char *dir, const float *x, int samples, int64_t numel) {
    char path[4200];
    snprintf(path, sizeof path, "%s/input.inc", dir);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "/* written by qat fit */\n#define QAT_N_INPUTS %d\nstatic const float qat_inputs[%d][%lld] = {\n",
            samples, samples, (long long)numel);
    for (int s = 0; s < samples; s++) {
        fprintf(f, "{\n");
        for (int64_t i = 0; i < numel; i++) fprintf(f, "%af,%s", (double)x[s * numel + i], i % 8 == 7 ? "\n" : " ");
        fprintf(f, "},\n");
    }
    fprintf(f, "};\n");
    return !fclose(f);
}

/* The plugin's report over `samples` inferences: the total and every
 * group "opJ..." summed by J, each per inference (rounded). */
static int read_cycles(const char *path, int samples, int64_t *total, int64_t *op, int n_ops) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512], fn[256];
    long long v, regions = -1;
    *total = -1;
    for (int j = 0; j < n_ops; j++) op[j] = 0;
    while (fgets(line, sizeof line, f)) {
        int j;
        if (sscanf(line, "regions: %lld", &v) == 1) regions = v;
        else if (sscanf(line, "cycles: %lld", &v) == 1) *total = v;
        else if (sscanf(line, "group: %255s %lld cycles", fn, &v) == 2 && sscanf(fn, "op%d", &j) == 1 && j >= 0 &&
                 j < n_ops)
            op[j] += v;
    }
    fclose(f);
    if (regions != samples || *total < 0) return -1;
    *total = (*total + samples / 2) / samples;
    for (int j = 0; j < n_ops; j++) op[j] = (op[j] + samples / 2) / samples;
    return 0;
}

int fit_cycles_measure(const fit_cycle_tools *t, const char *dir, const char *name, const qat_codegen_source *src,
                       const float *input, int samples, int64_t numel, int64_t *total, int64_t *op, int n_ops,
                       char *why, size_t len) {
    char file[256], log[4200], elf[4200], out[4200], plugin[4400], ld[4200], up[64], defs[3][200], c_path[4200],
        io_path[4200], main_path[4200], start_path[4200], inc[4200];
    for (int k = 0; k < QAT_CODEGEN_FILES; k++) {
        snprintf(file, sizeof file, "%s%s", name, qat_codegen_suffix(k));
        if (!write_file(dir, file, src->text[k], src->size[k])) return snprintf(why, len, "%s/%s: cannot write it", dir, file), -1;
    }
    for (size_t k = 0; k < sizeof firmware / sizeof *firmware; k++)
        if (!write_file(dir, firmware[k].name, firmware[k].text, *firmware[k].len))
            return snprintf(why, len, "%s/%s: cannot write it", dir, firmware[k].name), -1;
    if (!write_input(dir, input, samples, numel)) return snprintf(why, len, "%s/input.inc: cannot write it", dir), -1;
    size_t i = 0;
    for (; name[i] && i < sizeof up - 1; i++) up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[i] = '\0';
    snprintf(log, sizeof log, "%s/cycles.log", dir);
    snprintf(elf, sizeof elf, "%s/%s-m4.elf", dir, name);
    snprintf(out, sizeof out, "%s/%s.cycles", dir, name);
    snprintf(plugin, sizeof plugin, "%s,out=%s,group=op", t->plugin, out);
    snprintf(ld, sizeof ld, "%s/mps2.ld", dir);
    snprintf(defs[0], sizeof defs[0], "-DQAT_MODEL=%s", name);
    snprintf(defs[1], sizeof defs[1], "-DQAT_MODEL_UP=%s", up);
    snprintf(defs[2], sizeof defs[2], "-DQAT_MODEL_HEADER=\"%s.h\"", name);
    snprintf(c_path, sizeof c_path, "%s/%s.c", dir, name);
    snprintf(io_path, sizeof io_path, "%s/%s_io.c", dir, name);
    snprintf(main_path, sizeof main_path, "%s/run_once.c", dir);
    snprintf(start_path, sizeof start_path, "%s/startup.c", dir);
    snprintf(inc, sizeof inc, "-I%s", dir);
    char lib[4200];
    snprintf(lib, sizeof lib, "-L%s", dir);
    remove(log), remove(out);
    /* the flags of qat fit's firmware check (fit_build.c) and of the microcontroller tests */
    char *build[] = {(char *)t->cc, "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft", "-O2", "-std=gnu99",
                     "-ffunction-sections", "-fdata-sections", defs[0], defs[1], defs[2], inc, main_path, start_path,
                     c_path, io_path, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", lib, "-T", ld,
                     "-Wl,--gc-sections", "-o", elf, NULL};
    if (fit_run_program(build, log, NULL, 0) != 0)
        return snprintf(why, len, "%s could not build the cycle firmware %s (see %s)", t->cc, elf, log), -1;
    char *qemu[] = {(char *)t->qemu, "-M", "mps2-an386", "-cpu", "cortex-m4", "-nographic", "-monitor", "none",
                    "-serial", "none", "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
                    "-kernel", elf, "-plugin", plugin, NULL};
    int rc = fit_run_program(qemu, log, NULL, RUN_SECONDS);
    if (rc != 0)
        return snprintf(why, len, "%s %s: %s (see %s)", t->qemu, elf,
                        rc < 0 ? "did not finish (a fault, a hang or a signal)" : "the model's run failed", log), -1;
    if (read_cycles(out, samples, total, op, n_ops) != 0)
        return snprintf(why, len, "%s: not %d measured regions in the plugin's report", out, samples), -1;
    return 0;
}
