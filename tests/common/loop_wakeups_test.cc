// LoopWakeups: the timerfd fires at the time asked, to well under a millisecond (zmq_poll's
// own timeout could not), never before it, once per arming; Wake makes the eventfd readable
// until cleared.
#include "common/loop_wakeups.h"

#include <poll.h>

#include <memory>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

// Whether `fd` becomes readable within `timeout_ms`.
bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

TEST(LoopWakeupsTest, TheTimerFiresAtTheTimeAskedAndOnce) {
  auto w = LoopWakeups::Create();
  ASSERT_TRUE(w.ok()) << w.status();
  const absl::Time start = absl::Now();
  (*w)->ArmTimer(absl::Microseconds(1500));
  ASSERT_TRUE(Readable((*w)->timer_fd(), 1000));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Microseconds(1500));
  EXPECT_LT(took, absl::Milliseconds(100));  // loose: a loaded machine may be late to run us
  (*w)->ClearTimer();
  EXPECT_FALSE(Readable((*w)->timer_fd(), 20));  // one expiry per arming
}

TEST(LoopWakeupsTest, ANonPositiveWaitFiresAtOnceAndReArmingReplaces) {
  auto w = LoopWakeups::Create();
  ASSERT_TRUE(w.ok()) << w.status();
  (*w)->ArmTimer(absl::Seconds(-1));
  EXPECT_TRUE(Readable((*w)->timer_fd(), 1000));
  (*w)->ClearTimer();
  (*w)->ArmTimer(absl::Milliseconds(1));
  (*w)->ArmTimer(absl::Seconds(60));  // replaces the 1 ms arming
  EXPECT_FALSE(Readable((*w)->timer_fd(), 50));
}

TEST(LoopWakeupsTest, WakeMakesTheEventReadableUntilCleared) {
  auto w = LoopWakeups::Create();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(Readable((*w)->event_fd(), 0));
  (*w)->Wake();
  (*w)->Wake();
  EXPECT_TRUE(Readable((*w)->event_fd(), 0));
  (*w)->ClearEvent();
  EXPECT_FALSE(Readable((*w)->event_fd(), 0));
}

}  // namespace
}  // namespace r2sp
