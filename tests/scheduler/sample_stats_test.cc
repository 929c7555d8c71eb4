// SampleStats: exact percentiles while everything fits, exact count/mean/max beyond, and a
// bounded sample.
#include "scheduler/sample_stats.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(SampleStatsTest, EmptyIsAllZero) {
  SampleStats s;
  EXPECT_EQ(s.count(), 0);
  EXPECT_EQ(s.Quantile(0.5), 0);
  EXPECT_EQ(s.Json(), "{\"count\": 0, \"mean\": 0, \"p50\": 0, \"p99\": 0, \"max\": 0}");
}

TEST(SampleStatsTest, NearestRankPercentilesOfOneToHundred) {
  SampleStats s;
  for (int v = 100; v >= 1; --v) s.Add(v);
  EXPECT_EQ(s.count(), 100);
  EXPECT_EQ(s.mean(), 50.5);
  EXPECT_EQ(s.Quantile(0.5), 50);
  EXPECT_EQ(s.Quantile(0.99), 99);
  EXPECT_EQ(s.Quantile(1), 100);
  EXPECT_EQ(s.Quantile(0), 1);
  EXPECT_EQ(s.Json(1000, "_ms"),
            "{\"count\": 100, \"mean_ms\": 50500, \"p50_ms\": 50000, \"p99_ms\": 99000, "
            "\"max_ms\": 100000}");
}

TEST(SampleStatsTest, BeyondCapacityTheSampleStaysBoundedAndTheTotalsExact) {
  SampleStats s(/*capacity=*/10);
  for (int v = 1; v <= 1000; ++v) s.Add(v);
  EXPECT_EQ(s.count(), 1000);
  EXPECT_EQ(s.mean(), 500.5);
  EXPECT_EQ(s.max(), 1000);
  // A uniform sample of 10 of the 1000: its median is somewhere inside, not the first ten.
  EXPECT_GT(s.Quantile(0.5), 10);
  EXPECT_LE(s.Quantile(1), 1000);
}

}  // namespace
}  // namespace r2sp
