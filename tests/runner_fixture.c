/* Not a suite: a program built on the shared runner (test_util.h) with
 * one test that passes and one that skips, for test_runner to drive. */
#include "test_util.h"

static void test_passes(void) { CU_ASSERT_EQUAL(1 + 1, 2); }

static void test_skips(void) {
    QAT_TEST_SKIP("the fixture has no such CPU");
    CU_FAIL("QAT_TEST_SKIP returns from the test");
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"passes", test_passes},
        {"skips", test_skips},
        {NULL, NULL},
    };
    return qat_test_main("fixture", cases, argc, argv);
}
