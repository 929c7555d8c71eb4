// Tests of UseRealtimePriority's checks: 0 changes nothing, a priority outside 1-99 is refused
// saying what to give. (A valid priority would change this test process's own policy: the
// scheduler binary's use, with and without CAP_SYS_NICE, is realtime_priority_process_test.)
#include "scheduler/realtime_priority.h"

#include <sched.h>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(RealtimePriorityTest, ZeroLeavesThePolicyAlone) {
  const int before = sched_getscheduler(0);
  EXPECT_TRUE(UseRealtimePriority(0).ok());
  EXPECT_EQ(sched_getscheduler(0), before);
}

TEST(RealtimePriorityTest, APriorityOutsideOneTo99IsRefused) {
  const int before = sched_getscheduler(0);
  EXPECT_EQ(UseRealtimePriority(-1),
            absl::InvalidArgumentError("--realtime_priority=-1: give 0 (off) or a SCHED_FIFO "
                                       "priority from 1 to 99"));
  EXPECT_EQ(UseRealtimePriority(100),
            absl::InvalidArgumentError("--realtime_priority=100: give 0 (off) or a SCHED_FIFO "
                                       "priority from 1 to 99"));
  EXPECT_EQ(sched_getscheduler(0), before);
}

}  // namespace
}  // namespace r2sp
