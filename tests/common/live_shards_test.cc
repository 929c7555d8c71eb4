// Tests for CheckLiveShards (common/live_shards.h): malformed epoch plans are clear errors.
#include "common/live_shards.h"

#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(LiveShardsTest, MalformedPlansAreClearErrors) {
  EXPECT_TRUE(CheckLiveShards({0, 2}, 3).ok());
  for (const std::vector<int>& bad :
       std::vector<std::vector<int>>{{}, {0, 3}, {-1, 1}, {1, 1}, {2, 0}}) {
    EXPECT_EQ(CheckLiveShards(bad, 3).code(), absl::StatusCode::kInvalidArgument) << bad.size();
  }
}

}  // namespace
}  // namespace r2sp
