// ASSERT_OK(expr): the test stops, printing the status, unless `expr` (an absl::Status) is OK.
#ifndef R2SP_TESTS_TESTING_STATUS_ASSERT_H_
#define R2SP_TESTS_TESTING_STATUS_ASSERT_H_

#include "absl/status/status.h"
#include "gtest/gtest.h"

#define ASSERT_OK(expr)                \
  do {                                 \
    const ::absl::Status s_ = (expr);  \
    ASSERT_TRUE(s_.ok()) << s_;        \
  } while (0)

#endif  // R2SP_TESTS_TESTING_STATUS_ASSERT_H_
