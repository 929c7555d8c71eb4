// What a server does per worker iteration for its share of a model, by mode and on 1 or more
// threads (server --apply_threads). Default: one server's half of the cnn (3,274,634 parameters
// over 2 servers) in 1 MiB partitions, 4 workers.
//   bsp:          each push summed into the clock's aggregate; once all W are in, one update;
//                 W pulls share the new weights (zero-copy frames).
//   r2sp 2-pass:  each push its own update keeping the step term, then the pusher's pull's
//                 predicted weights in a second pass (the server before fused predictions).
//   r2sp:         the update computes the pull's predicted weights in its own pass
//                 (PartitionState::ApplyForeseeing), which the pull is sent.
// Rounds of W pushes and pulls run interleaved, mode by mode; prints the median per worker
// iteration and each mode's ratio to bsp in the same rounds, then r2sp's thread scaling.
//   bazel run -c opt //tools/bench:server_apply_benchmark -- --threads=1,2,4
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "server/clock_aggregator.h"
#include "server/partition_state.h"
#include "server/range_pool.h"
#include "server/sgd.h"
#include "tools/bench/bench_util.h"

DEFINE_int64(floats, 3274634 / 2, "parameters this server holds");
DEFINE_int64(partition_floats, 262144, "largest partition (1 MiB of fp32)");
DEFINE_int32(workers, 4, "workers pushing to the server (W)");
DEFINE_string(threads, "1,2,4", "thread counts to compare for r2sp (the first is the baseline)");
DEFINE_int32(reps, 30, "timed rounds");

namespace r2sp::bench {
namespace {

struct Held {
  std::unique_ptr<PartitionState> state;
  std::unique_ptr<ClockAggregator> aggregator;  // bsp
};

struct Server {
  std::unique_ptr<RangePool> pool;
  std::vector<Held> partitions;
};

enum class Mode { kBsp, kR2spTwoPass, kR2sp };

Server MakeServer(int threads, const std::vector<float>& init) {
  Server s;
  s.pool = std::make_unique<RangePool>(threads);
  for (size_t begin = 0; begin < init.size();) {
    const size_t n = std::min<size_t>(FLAGS_partition_floats, init.size() - begin);
    Held held{std::make_unique<PartitionState>(n),
              std::make_unique<ClockAggregator>(n, FLAGS_workers)};
    held.state->set_pool(s.pool.get());
    held.state->Init(init.data() + begin);
    s.partitions.push_back(std::move(held));
    begin += n;
  }
  return s;
}

// One round: every worker pushes `grad` and pulls, as `mode` serves them.
std::function<void()> RoundOf(Mode mode, Server& s, const std::vector<float>& grad) {
  const SgdOptions options;
  const int workers = FLAGS_workers;
  const float fraction = 1.0f / workers;
  const FractionalStep step = StepForFraction(options, fraction);
  // The other W - 1 pushes of 1/W each land before the puller's next one.
  const Prediction predict = PredictionFor(options, fraction, std::max(1, workers - 1));
  if (mode != Mode::kBsp) {
    for (Held& h : s.partitions) h.state->PredictedPullFrame(predict);  // keeps the step term
  }
  return [mode, &s, &grad, options, workers, step, predict] {
    for (int w = 0; w < workers; ++w) {
      size_t begin = 0;
      for (Held& h : s.partitions) {
        const float* g = grad.data() + begin;
        begin += h.state->num_elements();
        if (mode == Mode::kBsp) {
          CHECK(h.aggregator->Add(w, h.aggregator->clock(), g).ok());
          if (w + 1 < workers) continue;
          h.state->Apply(options, h.aggregator->scale(), h.aggregator->sum());
          h.aggregator->Advance();
          for (int puller = 0; puller < workers; ++puller) zmq::message_t f = h.state->PullFrame();
        } else if (mode == Mode::kR2spTwoPass) {
          h.state->Apply(step.options, step.grad_scale, g);
          zmq::message_t f = h.state->PredictedPullFrame(predict);  // released at once
        } else {
          h.state->ApplyForeseeing(step.options, step.grad_scale, g, predict);
          zmq::message_t f = h.state->PredictedPullFrame(predict);
        }
      }
    }
  };
}

void CompareModes(const std::vector<float>& init, const std::vector<float>& grad, int threads,
                  std::string* result) {
  const Mode modes[] = {Mode::kBsp, Mode::kR2spTwoPass, Mode::kR2sp};
  const char* names[] = {"bsp", "r2sp_2pass", "r2sp"};
  std::vector<Server> servers;
  std::vector<std::function<void()>> bodies;
  for (size_t k = 0; k < std::size(modes); ++k) servers.push_back(MakeServer(threads, init));
  for (size_t k = 0; k < servers.size(); ++k) bodies.push_back(RoundOf(modes[k], servers[k], grad));
  const auto times = InterleavedSeconds(/*warmup=*/3, FLAGS_reps, bodies);
  std::printf("per worker iteration (%d workers, %d thread(s)), median of %d interleaved rounds:\n",
              FLAGS_workers, threads, FLAGS_reps);
  for (size_t k = 0; k < servers.size(); ++k) {
    std::vector<double> ratios;
    for (int r = 0; r < FLAGS_reps; ++r) ratios.push_back(times[k][r] / times[0][r]);
    std::sort(ratios.begin(), ratios.end());
    std::printf("  %-10s %.3f ms, %.2fx bsp (rounds' quartiles %.2f-%.2f)\n", names[k],
                Median(times[k]) * 1e3 / FLAGS_workers, Median(ratios),
                ratios[ratios.size() / 4], ratios[3 * ratios.size() / 4]);
    if (k > 0) absl::StrAppend(result, " ", names[k], "_vs_bsp=", Median(ratios));
  }
}

void CompareThreads(const std::vector<int>& counts, const std::vector<float>& init,
                    const std::vector<float>& grad, std::string* result) {
  std::vector<Server> servers;
  std::vector<std::function<void()>> bodies;
  for (int threads : counts) servers.push_back(MakeServer(threads, init));
  for (Server& s : servers) bodies.push_back(RoundOf(Mode::kR2sp, s, grad));
  const auto times = InterleavedSeconds(/*warmup=*/3, FLAGS_reps, bodies);
  std::printf("r2sp per worker iteration by --apply_threads, median of %d interleaved rounds:\n",
              FLAGS_reps);
  for (size_t k = 0; k < counts.size(); ++k) {
    const double speedup = MedianRatio(times[0], times[k]);
    std::printf("  %2d thread(s): %.3f ms, %.2fx the first\n", counts[k],
                Median(times[k]) * 1e3 / FLAGS_workers, speedup);
    absl::StrAppend(result, " apply_threads_", counts[k], "_speedup=", speedup);
  }
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
  if (FLAGS_workers < 1 || FLAGS_workers > 1024 || FLAGS_floats < 1 || FLAGS_partition_floats < 1) {
    std::fprintf(stderr, "server_apply_benchmark: --workers must be in [1, 1024], --floats and "
                         "--partition_floats positive\n");
    return 2;
  }
  const std::vector<float> init = GradientLike(static_cast<size_t>(FLAGS_floats), 1);
  const std::vector<float> grad = GradientLike(static_cast<size_t>(FLAGS_floats), 2);
  std::printf("server share: %lld floats in partitions of up to %lld\n",
              static_cast<long long>(FLAGS_floats), static_cast<long long>(FLAGS_partition_floats));
  std::string result = "RESULT";
  CompareModes(init, grad, counts[0], &result);
  CompareThreads(counts, init, grad, &result);
  std::printf("%s\n", result.c_str());
  return 0;
}

}  // namespace
}  // namespace r2sp::bench

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return r2sp::bench::Main();
}
