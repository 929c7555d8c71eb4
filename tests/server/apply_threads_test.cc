// Tests of --apply_threads=auto's rule (AutoApplyThreads), exactly on each branch, and of the
// flag's parsing.
#include "server/apply_threads.h"

#include <sched.h>

#include <string>

#include "gtest/gtest.h"
#include "server/partition_state.h"

namespace r2sp {
namespace {

constexpr size_t kPiece = PartitionState::kApplyPiece;  // 32,768 elements

TEST(AutoApplyThreadsTest, APartitionOfFewerThanTwoPiecesIsNeverSplit) {
  EXPECT_EQ(AutoApplyThreads(0, 16, 1), 1);
  EXPECT_EQ(AutoApplyThreads(2 * kPiece - 1, 16, 1), 1);
  EXPECT_EQ(AutoApplyThreads(2 * kPiece, 16, 1), 2);  // two pieces: two threads
}

TEST(AutoApplyThreadsTest, HelpersNeedCoresBeyondTheIoThreadsAndTheRequestThread) {
  const size_t one_mib = 262144;  // 8 pieces
  EXPECT_EQ(AutoApplyThreads(one_mib, 1, 1), 1);
  EXPECT_EQ(AutoApplyThreads(one_mib, 2, 1), 1);  // this 2-vCPU VM: no core left over
  EXPECT_EQ(AutoApplyThreads(one_mib, 3, 1), 2);
  EXPECT_EQ(AutoApplyThreads(one_mib, 4, 1), 3);
  EXPECT_EQ(AutoApplyThreads(one_mib, 4, 2), 2);  // CURVE's two I/O threads
  EXPECT_EQ(AutoApplyThreads(one_mib, 4, 3), 1);
  EXPECT_EQ(AutoApplyThreads(one_mib, 4, 4), 1);
}

TEST(AutoApplyThreadsTest, NoMoreThreadsThanTheMeasuredCap) {
  EXPECT_EQ(kMaxAutoApplyThreads, 4);
  EXPECT_EQ(AutoApplyThreads(3 * kPiece, 16, 1), 3);  // three pieces: three threads
  EXPECT_EQ(AutoApplyThreads(262144, 16, 1), 4);      // the GPU machine, 1 MiB partitions
  EXPECT_EQ(AutoApplyThreads(size_t{1} << 30, 64, 8), 4);
}

TEST(UsableCoresTest, AtLeastOneAndNoMoreThanTheMachineHas) {
  const int cores = UsableCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, CPU_SETSIZE);
}

TEST(ParseApplyThreadsTest, AutoOrACountFromOneTo64) {
  EXPECT_EQ(ParseApplyThreads("auto").value(), kAutoApplyThreads);
  EXPECT_EQ(ParseApplyThreads("1").value(), 1);
  EXPECT_EQ(ParseApplyThreads("64").value(), 64);
  for (const char* bad : {"0", "65", "-2", "two", "", "Auto"}) {
    const absl::StatusOr<int> parsed = ParseApplyThreads(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("--apply_threads=") + bad + ": give auto, or a thread count from 1 to 64");
  }
}

}  // namespace
}  // namespace r2sp
