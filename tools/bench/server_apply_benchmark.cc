// What a server does for one r2sp iteration of its share of a model, on 1 or more threads
// (server --apply_threads): each partition's update from a push, then the predicted weights a
// pull asks for. Default: one server's half of the cnn (3,274,634 parameters over 2 servers) in
// 1 MiB partitions. Thread counts run interleaved, round by round; prints the median per
// iteration and each count's speedup over one thread in the same rounds.
//   bazel run -c opt //tools/bench:server_apply_benchmark -- --threads=1,2,4
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "server/partition_state.h"
#include "server/range_pool.h"
#include "server/sgd.h"
#include "tools/bench/bench_util.h"

DEFINE_int64(floats, 3274634 / 2, "parameters this server holds");
DEFINE_int64(partition_floats, 262144, "largest partition (1 MiB of fp32)");
DEFINE_string(threads, "1,2,4", "thread counts to compare (the first is the baseline)");
DEFINE_int32(reps, 30, "timed rounds");

namespace r2sp::bench {
namespace {

struct Server {
  std::unique_ptr<RangePool> pool;
  std::vector<std::unique_ptr<PartitionState>> partitions;
};

Server MakeServer(int threads, const std::vector<float>& init) {
  Server s;
  s.pool = std::make_unique<RangePool>(threads);
  for (size_t begin = 0; begin < init.size();) {
    const size_t n = std::min<size_t>(FLAGS_partition_floats, init.size() - begin);
    auto p = std::make_unique<PartitionState>(n);
    p->set_pool(s.pool.get());
    p->Init(init.data() + begin);
    s.partitions.push_back(std::move(p));
    begin += n;
  }
  return s;
}

int Main() {
  std::vector<int> counts;
  for (absl::string_view t : absl::StrSplit(FLAGS_threads, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1 || n > 64) {
      std::fprintf(stderr, "server_apply_benchmark: bad --threads entry '%s'\n",
                   std::string(t).c_str());
      return 2;
    }
    counts.push_back(n);
  }
  const std::vector<float> init = GradientLike(static_cast<size_t>(FLAGS_floats), 1);
  const std::vector<float> grad = GradientLike(static_cast<size_t>(FLAGS_floats), 2);
  SgdOptions options;
  const Prediction prediction = PredictionFor(options, 0.25f, 3);
  std::vector<Server> servers;
  std::vector<std::function<void()>> bodies;
  for (int threads : counts) servers.push_back(MakeServer(threads, init));
  for (Server& s : servers) {
    bodies.push_back([&s, &grad, &options, &prediction] {
      size_t begin = 0;
      for (auto& p : s.partitions) {
        p->Apply(options, 0.25f, grad.data() + begin);
        zmq::message_t frame = p->PredictedPullFrame(prediction);  // released at once
        begin += p->num_elements();
      }
    });
  }
  const auto times = InterleavedSeconds(/*warmup=*/3, FLAGS_reps, bodies);
  std::printf("server share: %lld floats in %zu partitions; per r2sp iteration (update + "
              "predicted weights), median of %d interleaved rounds:\n",
              static_cast<long long>(FLAGS_floats), servers[0].partitions.size(), FLAGS_reps);
  std::string result = "RESULT";
  for (size_t k = 0; k < counts.size(); ++k) {
    std::vector<double> ratio;
    for (int r = 0; r < FLAGS_reps; ++r) ratio.push_back(times[0][r] / times[k][r]);
    const double speedup = Median(ratio);
    std::printf("  %2d thread(s): %.3f ms, %.2fx the first\n", counts[k],
                Median(times[k]) * 1e3, speedup);
    absl::StrAppend(&result, " apply_threads_", counts[k], "_speedup=", speedup);
  }
  std::printf("%s\n", result.c_str());
  return 0;
}

}  // namespace
}  // namespace r2sp::bench

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return r2sp::bench::Main();
}
