// RangePool: every piece of the range runs exactly once, whatever the thread count, the size
// (empty, one piece, a short last piece) and however many runs follow each other; with helpers
// the pieces really spread over threads; one thread runs the body on the caller.
#include "server/range_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(RangePoolTest, EveryElementOnceInPiecesOfTheGrain) {
  for (int threads : {1, 2, 4}) {
    RangePool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{99}, size_t{100}, size_t{101}, size_t{1003}}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_pieces{0};
      pool.Run(n, 100, [&](size_t begin, size_t end) {
        if (begin % 100 != 0 || end - begin > 100 || end > n || begin >= end) ++bad_pieces;
        for (size_t i = begin; i < end; ++i) ++hits[i];
      });
      EXPECT_EQ(bad_pieces.load(), 0) << threads << " " << n;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
      }
    }
  }
}

TEST(RangePoolTest, ManyRunsInARowEachComplete) {
  RangePool pool(3);
  std::atomic<int64_t> sum{0};
  for (int run = 0; run < 2000; ++run) {
    std::atomic<int64_t> this_run{0};
    pool.Run(64, 4, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) this_run += static_cast<int64_t>(i);
    });
    ASSERT_EQ(this_run.load(), 63 * 64 / 2) << "run " << run;  // done when Run returned
    sum += this_run;
  }
  EXPECT_EQ(sum.load(), int64_t{2000} * 63 * 64 / 2);
}

TEST(RangePoolTest, HelpersTakePiecesAndOneThreadIsTheCaller) {
  RangePool pool(4);
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  for (int run = 0; run < 50 && ids.size() < 2; ++run) {
    pool.Run(64, 1, [&](size_t, size_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough to share
      absl::MutexLock lock(&mu);
      ids.insert(std::this_thread::get_id());
    });
  }
  EXPECT_GE(ids.size(), 2u);
  EXPECT_LE(ids.size(), 4u);
  RangePool alone(1);
  std::thread::id ran_on;
  alone.Run(10, 1, [&](size_t, size_t) { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace r2sp
