/* The CUnit suites' runner: test cases, skips, the selection of cases
 * from the command line, a suite's temporary directory. It needs CUnit and
 * the C library alone (no qat module), so the suites of the modules that
 * link against the runtime alone use it too; test_util.h adds the helpers
 * of the training side. */
#ifndef QAT_TEST_MAIN_H
#define QAT_TEST_MAIN_H

#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    void (*fn)(void);
} qat_test_case;

/* Skipped tests: a test that cannot run here (the CPU lacks the
 * instructions it checks, the build has no such code) says so with
 * QAT_TEST_SKIP instead of passing without asserting anything. The count
 * lives in a function so that every suite (one translation unit) has its
 * own without a global definition. */
static inline unsigned *qat_test__skips(void) {
    static unsigned n;
    return &n;
}
static inline void qat_test__skip(const char *reason) {
    CU_pTest t = CU_get_current_test();
    printf("\nSKIPPED: %s: %s\n", t && t->pName ? t->pName : "(no test)", reason);
    ++*qat_test__skips();
}
/* Records a skip of the running test, with the reason, and returns from it. */
#define QAT_TEST_SKIP(reason)    \
    do {                         \
        qat_test__skip(reason);  \
        return;                  \
    } while (0)

#define QAT_TEST_EXIT_SKIPPED 77 /* ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt) */

/* Which cases to run, from the command line: none given runs them all;
 * otherwise each argument is a case's exact name. Returns 0 and fills
 * selected[], or prints what went wrong and returns 2. */
static inline int qat_test__select(const char *prog, const qat_test_case *cases, int argc, char **argv,
                                   bool *selected, int n_cases) {
    for (int c = 0; c < n_cases; c++) selected[c] = argc < 2;
    for (int i = 1; i < argc; i++) {
        int c = 0;
        while (c < n_cases && strcmp(cases[c].name, argv[i])) c++;
        if (c < n_cases) {
            selected[c] = true;
            continue;
        }
        fprintf(stderr, "%s: no test named \"%s\"; the tests are:\n", prog, argv[i]);
        for (c = 0; c < n_cases; c++) fprintf(stderr, "  %s\n", cases[c].name);
        return 2;
    }
    return 0;
}

/* Runs one suite in CUnit's basic mode: every case, or only the cases
 * named on the command line (exact names; `--list` prints them, one a
 * line). Exit status: 0 passed, 1 a failure, 2 a bad command line or
 * CUnit error, 3 nothing ran, 77 every test that ran was skipped. */
static inline int qat_test_main(const char *suite_name, const qat_test_case *cases, int argc, char **argv) {
    const char *prog = argc > 0 ? argv[0] : suite_name;
    int n_cases = 0;
    while (cases[n_cases].name) n_cases++;
    if (argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        if (strcmp(argv[1], "--list"))
            printf("usage: %s [--list | TEST...]: runs every test, or the tests named (exact names)\n", prog);
        else
            for (int c = 0; c < n_cases; c++) printf("%s\n", cases[c].name);
        return 0;
    }
    bool selected[256];
    if (n_cases > (int)(sizeof selected / sizeof *selected)) return fprintf(stderr, "%s: too many tests\n", prog), 2;
    if (qat_test__select(prog, cases, argc, argv, selected, n_cases)) return 2;
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
    if (!suite) return 2;
    for (int c = 0; c < n_cases; c++)
        if (selected[c] && !CU_add_test(suite, cases[c].name, cases[c].fn)) return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run(), skipped = *qat_test__skips();
    CU_cleanup_registry();
    printf("\n%s: %u test(s) run, %u skipped\n", suite_name, ran, skipped);
    if (ran == 0) return 3; /* a suite that runs nothing is a failure */
    if (failed) return 1;
    return skipped == ran ? QAT_TEST_EXIT_SKIPPED : 0;
}

/* A fresh directory /tmp/qat-test-<name>-XXXXXX for a suite's files;
 * qat_test_rmdir removes it and everything in it (returns 0 on success). */
char *mkdtemp(char *template); /* POSIX; declared here for -std=c11 */
static inline bool qat_test_tmpdir(char *dir, size_t len, const char *name) {
    snprintf(dir, len, "/tmp/qat-test-%s-XXXXXX", name);
    return mkdtemp(dir) != NULL;
}
int system(const char *command);
static inline int qat_test_rmdir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

#endif
