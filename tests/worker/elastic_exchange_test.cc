// Elastic averaging on the worker against the real scheduler and server logic, in-process
// (2 workers, 2 servers): after N rounds of local SGD steps and elastic exchanges, the centre
// and each worker's own parameters equal a hand-computed reference bit for bit, in easgd (rounds
// against the same centre) and eawild (each difference added as it arrives, in a fixed order
// here); only the steps that end a period communicate; evaluations see the centre; with hetero
// batching the centre takes each difference weighted by its batch. Without the
// local step (the Python client's: its script's optimizer takes it) the exchange alone gives the
// same results, and the centre's pull for evaluations waits for the rounds and can be interrupted.
// With a sparse push codec each worker moves by what it sent.
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/codec/codec_spec.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/in_process_job.h"
#include "worker/elastic_exchange.h"
#include "worker/exchanger.h"

namespace r2sp {
namespace {

constexpr int kElements = 1000;
constexpr int kPeriod = 2;
constexpr int kSteps = 6;  // 3 rounds
constexpr float kAlpha = 0.5f, kLr = 0.25f, kMomentum = 0.5f;

std::vector<proto::TensorSpec> Model() {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(kElements);
  return {t};
}

SchedulerOptions Job(proto::SyncMode sync) {
  SchedulerOptions options;
  options.num_servers = 2;
  options.num_workers = 2;
  options.partition_bytes = 1024;  // 256 floats: 4 partitions over 2 servers
  options.sync = sync;
  options.elastic_period = kPeriod;
  options.elastic_alpha = kAlpha;
  options.heartbeat_timeout = absl::Minutes(5);  // no heartbeats here
  return options;
}

ServerOptions Servers() {
  ServerOptions options;
  options.elastic_period = kPeriod;
  return options;
}

std::vector<float> Initial() {
  std::vector<float> x(kElements);
  for (int i = 0; i < kElements; ++i) x[i] = 0.5f * (i % 3);
  return x;
}

// Worker r's gradient at step s: small integers, so that every value below stays a short
// binary fraction and fp32 arithmetic is exact in any order (with or without fused
// multiply-adds): the reference can then be compared bit for bit.
std::vector<float> Gradient(int rank, int step) {
  std::vector<float> g(kElements);
  for (int i = 0; i < kElements; ++i) g[i] = static_cast<float>(rank + 1 + step + i % 4);
  return g;
}

ExchangerOptions ModeOf(const testing::JobWorker& w) {
  const proto::AddressBook& book = w.registration.book();
  ExchangerOptions mode;
  mode.sync = book.sync();
  mode.workers = book.workers_size();
  mode.elastic.sgd = {kLr, kMomentum, 0.0f};
  mode.elastic.period = book.elastic_period();
  mode.elastic.alpha = static_cast<float>(book.elastic_alpha());
  return mode;
}

// The reference: both workers' parameters and the centre, by the rules of docs/MODES.md.
// `order` gives the exchanges of a round in the order the servers see them: in easgd every
// difference is against the round's centre; in eawild each worker pulls the centre as the
// previous differences left it.
struct Reference {
  std::vector<float> x[2], m[2], centre;
  float weight[2] = {1.0f, 1.0f};  // of each worker's difference in the centre
  Reference() : centre(Initial()) {
    for (int r = 0; r < 2; ++r) {
      x[r] = Initial();
      m[r].assign(kElements, 0.0f);
    }
  }
  void Run(bool wild) {
    for (int s = 0; s < kSteps; ++s) {
      for (int r = 0; r < 2; ++r) {
        const std::vector<float> g = Gradient(r, s);
        for (int i = 0; i < kElements; ++i) {
          m[r][i] = kMomentum * m[r][i] + g[i];
          x[r][i] = x[r][i] - kLr * m[r][i];
        }
      }
      if ((s + 1) % kPeriod != 0) continue;
      std::vector<float> sum(kElements, 0.0f);
      for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < kElements; ++i) {
          const float d = kAlpha * (x[r][i] - centre[i]);
          x[r][i] -= d;
          if (wild) centre[i] += weight[r] * d;
          sum[i] += weight[r] * d;
        }
      }
      if (!wild) {
        for (int i = 0; i < kElements; ++i) centre[i] += sum[i];
      }
    }
  }
};

absl::Status ExpectEqual(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what) {
  for (int i = 0; i < kElements; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return absl::InternalError(
          absl::StrCat(what, "[", i, "] = ", got[i], ", want ", want[i], " (bit for bit)"));
    }
  }
  return absl::OkStatus();
}

// One step of worker `w` at `step` on `batch` samples: checks that only a period's last step
// communicates.
absl::Status RunStep(Exchanger& exchanger, testing::JobWorker& w, int step, int batch = 0) {
  const std::vector<float> grad = Gradient(w.rank(), step);
  ExchangeStep s;
  s.grads = grad.data();
  s.params = w.params.data();
  s.computed = absl::Now();
  s.iterations_left = kSteps - step;
  IterationMetrics m;
  m.clock = step;
  m.batch = batch;
  m.compute_seconds = 0.001 * batch;
  R2SP_RETURN_IF_ERROR(exchanger.Exchange(s, &m));
  const bool exchanges = (step + 1) % kPeriod == 0;
  const uint64_t want_bytes = exchanges ? kElements * sizeof(float) : 0;
  if (m.push_bytes != want_bytes || m.pull_bytes != want_bytes ||
      (exchanges && (m.push_seconds <= 0 || m.pull_seconds <= 0))) {
    return absl::InternalError(absl::StrCat("step ", step, ": metrics ", m.push_bytes, " ",
                                            m.pull_bytes, " ", m.push_seconds));
  }
  return absl::OkStatus();
}

TEST(ElasticExchangeTest, EasgdRoundsGiveTheReferenceCentreAndWorkersBitForBit) {
  testing::InProcessJob job(Job(proto::EASGD), Servers(), Model());
  ASSERT_OK(job.Start(Initial()));
  Reference want;
  want.Run(/*wild=*/false);
  ASSERT_OK(job.OnEveryWorker([&want](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(ModeOf(w), w.ps.get(), w.scheduler.get(), nullptr);
    for (int s = 0; s < kSteps; ++s) R2SP_RETURN_IF_ERROR(RunStep(exchanger, w, s));
    R2SP_RETURN_IF_ERROR(ExpectEqual(w.params, want.x[w.rank()], "worker copy"));
    // The evaluation's centre waits for the last round (the other worker's difference).
    R2SP_ASSIGN_OR_RETURN(const float* centre, exchanger.EvaluationParams(w.params.data()));
    if (centre == w.params.data()) return absl::InternalError("evaluated the worker's copy");
    return ExpectEqual(std::vector<float>(centre, centre + kElements), want.centre, "centre");
  }));
}

TEST(ElasticExchangeTest, EawildAddsEachDifferenceAsItArrivesBitForBit) {
  testing::InProcessJob job(Job(proto::EAWILD), Servers(), Model());
  ASSERT_OK(job.Start(Initial()));
  Reference want;
  want.Run(/*wild=*/true);
  std::vector<testing::JobWorker>& workers = job.workers();
  Exchanger e0(ModeOf(workers[0]), workers[0].ps.get(), workers[0].scheduler.get(), nullptr);
  Exchanger e1(ModeOf(workers[1]), workers[1].ps.get(), workers[1].scheduler.get(), nullptr);
  // One thread, worker 0 before worker 1 at every step: eawild never waits, so this order is
  // the order the servers see the differences in.
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_OK(RunStep(e0, workers[0], s));
    ASSERT_OK(RunStep(e1, workers[1], s));
  }
  ASSERT_OK(ExpectEqual(workers[0].params, want.x[0], "worker 0"));
  ASSERT_OK(ExpectEqual(workers[1].params, want.x[1], "worker 1"));
  absl::StatusOr<const float*> centre = e0.EvaluationParams(workers[0].params.data());
  ASSERT_OK(centre.status());
  ASSERT_OK(ExpectEqual(std::vector<float>(*centre, *centre + kElements), want.centre, "centre"));
  // The reference's two modes differ here: eawild's second difference saw the first.
  Reference rounds;
  rounds.Run(/*wild=*/false);
  EXPECT_FALSE(ExpectEqual(want.centre, rounds.centre, "").ok());
}

// Hetero batching (B = 64, W = 2): worker 0 computes 48 samples a step and moves the centre by
// 1.5 times its difference, worker 1 computes 16 and moves it by half of its; each worker's own
// copy moves by its whole difference, as without hetero batching.
void ExpectDifferencesWeightedByBatch(proto::SyncMode sync) {
  SchedulerOptions options = Job(sync);
  options.slots.hetero_batching = true;
  options.slots.batching.global_batch = 64;
  testing::InProcessJob job(options, Servers(), Model());
  ASSERT_OK(job.Start(Initial()));
  const bool wild = sync == proto::EAWILD;
  Reference want;
  want.weight[0] = 1.5f;
  want.weight[1] = 0.5f;
  want.Run(wild);
  Reference unweighted;
  unweighted.Run(wild);
  ASSERT_FALSE(ExpectEqual(want.centre, unweighted.centre, "").ok());
  std::vector<testing::JobWorker>& workers = job.workers();
  std::vector<std::unique_ptr<Exchanger>> exchangers;
  for (testing::JobWorker& w : workers) {
    ExchangerOptions mode = ModeOf(w);
    mode.hetero_batching = true;
    mode.global_batch = w.registration.book().global_batch();
    mode.initial_batch = w.registration.book().initial_batch();
    exchangers.push_back(std::make_unique<Exchanger>(mode, w.ps.get(), w.scheduler.get(), nullptr));
  }
  const int batch[2] = {48, 16};
  auto run = [&](int r, int s) { return RunStep(*exchangers[r], workers[r], s, batch[r]); };
  if (wild) {  // one thread, worker 0 first: the order the servers see
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_OK(run(0, s));
      ASSERT_OK(run(1, s));
    }
  } else {  // easgd's rounds wait for both workers
    ASSERT_OK(job.OnEveryWorker([&run](testing::JobWorker& w) -> absl::Status {
      for (int s = 0; s < kSteps; ++s) R2SP_RETURN_IF_ERROR(run(w.rank(), s));
      return absl::OkStatus();
    }));
  }
  ASSERT_OK(ExpectEqual(workers[0].params, want.x[0], "worker 0"));
  ASSERT_OK(ExpectEqual(workers[1].params, want.x[1], "worker 1"));
  absl::StatusOr<const float*> centre = exchangers[0]->EvaluationParams(workers[0].params.data());
  ASSERT_OK(centre.status());
  ASSERT_OK(ExpectEqual(std::vector<float>(*centre, *centre + kElements), want.centre, "centre"));
}

TEST(ElasticExchangeTest, EasgdWithHeteroBatchingWeightsEachDifferenceByItsBatch) {
  ExpectDifferencesWeightedByBatch(proto::EASGD);
}

TEST(ElasticExchangeTest, EawildWithHeteroBatchingWeightsEachDifferenceByItsBatch) {
  ExpectDifferencesWeightedByBatch(proto::EAWILD);
}

// A sparse push codec: each worker moves by the part of its difference it sent and the centre
// by the same, so x_0 + x_1 + centre after the run is what it is without any exchange (the
// local steps here do not depend on the parameters), bit for bit; the centre and the copies
// differ from the dense run's, and nothing is sent twice (error feedback would send the kept
// part again and move the sum). In both modes, top-k and csc.
void ExpectSparseDifferencesKeepTheSum(proto::SyncMode sync, const std::string& codec) {
  SCOPED_TRACE(codec);
  PsClientOptions ps;
  ps.push_codec = *codec::ParseCodecSpec("push_codec", codec);
  testing::InProcessJob job(Job(sync), Servers(), Model(), ps);
  ASSERT_OK(job.Start(Initial()));
  std::vector<testing::JobWorker>& workers = job.workers();
  std::vector<std::unique_ptr<Exchanger>> exchangers;
  for (testing::JobWorker& w : workers) {
    exchangers.push_back(std::make_unique<Exchanger>(ModeOf(w), w.ps.get(), w.scheduler.get(),
                                                     nullptr));
  }
  auto run = [&](int r) -> absl::Status {
    for (int s = 0; s < kSteps; ++s) {
      const std::vector<float> grad = Gradient(r, s);
      ExchangeStep step;
      step.grads = grad.data();
      step.params = workers[r].params.data();
      step.computed = absl::Now();
      step.iterations_left = kSteps - s;
      IterationMetrics m;
      m.clock = s;
      const uint64_t before = workers[r].ps->counters().bytes_pushed;
      R2SP_RETURN_IF_ERROR(exchangers[r]->Exchange(step, &m));
      const uint64_t pushed = workers[r].ps->counters().bytes_pushed - before;
      if ((s + 1) % kPeriod == 0 && pushed >= kElements * sizeof(float)) {
        return absl::InternalError(absl::StrCat("step ", s, " pushed ", pushed, " bytes"));
      }
    }
    return absl::OkStatus();
  };
  if (sync == proto::EAWILD) {
    ASSERT_OK(run(0));
    ASSERT_OK(run(1));
  } else {
    ASSERT_OK(job.OnEveryWorker([&run](testing::JobWorker& w) { return run(w.rank()); }));
  }
  absl::StatusOr<const float*> centre = exchangers[0]->EvaluationParams(workers[0].params.data());
  ASSERT_OK(centre.status());
  Reference local;  // the local steps alone: no exchange moves the sum
  for (int s = 0; s < kSteps; ++s) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> g = Gradient(r, s);
      for (int i = 0; i < kElements; ++i) {
        local.m[r][i] = kMomentum * local.m[r][i] + g[i];
        local.x[r][i] = local.x[r][i] - kLr * local.m[r][i];
      }
    }
  }
  std::vector<float> got(kElements), want(kElements);
  for (int i = 0; i < kElements; ++i) {
    got[i] = workers[0].params[i] + workers[1].params[i] + (*centre)[i];
    want[i] = local.x[0][i] + local.x[1][i] + local.centre[i];
  }
  ASSERT_OK(ExpectEqual(got, want, "x_0 + x_1 + centre"));
  Reference dense;
  dense.Run(sync == proto::EAWILD);
  EXPECT_FALSE(ExpectEqual(std::vector<float>(*centre, *centre + kElements), dense.centre, "")
                   .ok());
  EXPECT_FALSE(ExpectEqual(workers[0].params, dense.x[0], "").ok());
  EXPECT_FALSE(ExpectEqual(std::vector<float>(*centre, *centre + kElements), Initial(), "").ok());
}

TEST(ElasticExchangeTest, EasgdSparseDifferencesMoveWorkerAndCentreByWhatWasSent) {
  ExpectSparseDifferencesKeepTheSum(proto::EASGD, "topk:0.25");
  ExpectSparseDifferencesKeepTheSum(proto::EASGD, "csc:0.5,chunk=32");
}

TEST(ElasticExchangeTest, EawildSparseDifferencesMoveWorkerAndCentreByWhatWasSent) {
  ExpectSparseDifferencesKeepTheSum(proto::EAWILD, "topk:0.25");
  ExpectSparseDifferencesKeepTheSum(proto::EAWILD, "csc:0.5,chunk=32");
}

// The Python client's way: the caller takes the local step (here by hand, with the reference's
// arithmetic) and hands no gradient over; the exchange alone must give the reference.
TEST(ElasticExchangeTest, WithoutTheLocalStepTheExchangeAloneGivesTheReference) {
  testing::InProcessJob job(Job(proto::EASGD), Servers(), Model());
  ASSERT_OK(job.Start(Initial()));
  Reference want;
  want.Run(/*wild=*/false);
  ASSERT_OK(job.OnEveryWorker([&want](testing::JobWorker& w) -> absl::Status {
    ExchangerOptions mode = ModeOf(w);
    mode.elastic.local_step = false;
    mode.elastic.sgd = {1e6f, 0.0f, 0.0f};  // would ruin the copy, were it applied
    Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
    std::vector<float> momentum(kElements, 0.0f);
    for (int s = 0; s < kSteps; ++s) {
      const std::vector<float> g = Gradient(w.rank(), s);
      for (int i = 0; i < kElements; ++i) {
        momentum[i] = kMomentum * momentum[i] + g[i];
        w.params[i] = w.params[i] - kLr * momentum[i];
      }
      ExchangeStep step;  // no gradient
      step.params = w.params.data();
      step.computed = absl::Now();
      step.iterations_left = kSteps - s;
      IterationMetrics m;
      m.clock = s;
      R2SP_RETURN_IF_ERROR(exchanger.Exchange(step, &m));
    }
    R2SP_RETURN_IF_ERROR(ExpectEqual(w.params, want.x[w.rank()], "worker copy"));
    // As the Python client pulls it for an evaluation: after the rounds this worker pushed.
    std::vector<float> centre(kElements, -1.0f);
    R2SP_RETURN_IF_ERROR(
        PullCentre(w.ps.get(), proto::EASGD, kSteps / kPeriod, centre.data(), nullptr));
    return ExpectEqual(centre, want.centre, "centre");
  }));
}

// An easgd pull of the centre waits for rounds nobody pushed; the interrupt ends the wait.
TEST(ElasticExchangeTest, TheCentresPullWaitsForTheRoundsAndCanBeInterrupted) {
  testing::InProcessJob job(Job(proto::EASGD), Servers(), Model());
  ASSERT_OK(job.Start(Initial()));
  testing::JobWorker& w = job.workers()[0];
  std::vector<float> centre(kElements, -1.0f);
  int asked = 0;
  const absl::Time start = absl::Now();
  const absl::Status waited =
      PullCentre(w.ps.get(), proto::EASGD, 1, centre.data(), [&asked] { return ++asked == 3; });
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled) << waited;
  EXPECT_EQ(asked, 3);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  // Round 0 needs nothing: the initial centre at once.
  ASSERT_OK(PullCentre(w.ps.get(), proto::EASGD, 0, centre.data(), nullptr));
  ASSERT_OK(ExpectEqual(centre, Initial(), "initial centre"));
}

}  // namespace
}  // namespace r2sp
