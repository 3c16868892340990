/* The shared test runner (test_util.h), through runner_fixture: tests
 * named on the command line run alone, --list prints the names, an
 * unknown name is an error that lists them, and skipped tests are
 * reported by name and counted, a suite that only skipped exiting 77. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_util.h"

static const char *fixture;
static char dir[256], beside[1024];

/* Runs the fixture with args; its stdout and stderr together go to out.
 * Returns the exit status. */
static int run(const char *args, char *out, size_t len) {
    char cmd[1024], path[300];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", fixture, args, path);
    int st = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_select_by_name(void) {
    char out[8192];
    CU_ASSERT_EQUAL(run("--list", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "passes\nskips\n");
    CU_ASSERT_EQUAL(run("passes", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fixture: 1 test(s) run, 0 skipped"));
    CU_ASSERT_PTR_NULL(strstr(out, "SKIPPED"));
    CU_ASSERT_EQUAL(run("nope", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no test named \"nope\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "  passes\n  skips\n"));
    CU_ASSERT_EQUAL(run("pass", out, sizeof out), 2); /* exact names only */
}

static void test_skips_are_reported(void) {
    char out[8192];
    CU_ASSERT_EQUAL(run("", out, sizeof out), 0); /* one passed: the suite passes */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SKIPPED: skips: the fixture has no such CPU\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fixture: 2 test(s) run, 1 skipped"));
    CU_ASSERT_EQUAL(run("skips", out, sizeof out), QAT_TEST_EXIT_SKIPPED); /* all skipped */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SKIPPED: skips: the fixture has no such CPU\n"));
}

int main(int argc, char **argv) {
    /* ctest names the fixture; run by hand (or by CI's valgrind loop) it
     * is the runner_fixture built beside this program */
    fixture = getenv("QAT_RUNNER_FIXTURE");
    if (!fixture) {
        const char *slash = strrchr(argv[0], '/');
        int n = slash ? (int)(slash - argv[0]) + 1 : 0;
        snprintf(beside, sizeof beside, "%.*srunner_fixture", n, argv[0]);
        fixture = beside;
    }
    if (!qat_test_tmpdir(dir, sizeof dir, "runner")) return 2;
    const qat_test_case cases[] = {
        {"tests named on the command line run alone; --list; unknown names", test_select_by_name},
        {"skipped tests are named and counted; only skips exit 77", test_skips_are_reported},
        {NULL, NULL},
    };
    int rc = qat_test_main("runner", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
