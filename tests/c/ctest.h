/* A minimal C test harness: CHECK records failures, TEST_CASE runs one case and prints
 * "ok"/"not ok" lines; main ends with the counts line the test runner adds up. */
#ifndef DT_TESTS_CTEST_H
#define DT_TESTS_CTEST_H

#include <stdio.h>

static int ctest_passed, ctest_failed, ctest_case_failed;

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      printf("  check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
      ctest_case_failed = 1;                                                      \
    }                                                                             \
  } while (0)

#define TEST_CASE(fn)                                                             \
  do {                                                                            \
    ctest_case_failed = 0;                                                        \
    fn();                                                                         \
    if (ctest_case_failed) ctest_failed++, printf("not ok - %s\n", #fn);         \
    else ctest_passed++, printf("ok - %s\n", #fn);                                \
  } while (0)

#define CTEST_END()                                                               \
  (printf("c tests: %d passed, %d failed\n", ctest_passed, ctest_failed), ctest_failed ? 1 : 0)

#endif
