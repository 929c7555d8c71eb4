// The server applying the training script's optimizer (PushInfo.optimizer): each run of a
// partition by its own rule in asp and on bsp's clock averages, a changed learning rate from the
// update it comes with, malformed runs refused with nothing changed, sparse pushes as their
// dense equivalents, checkpoints that carry Adam's moments across a restore bit for bit, and
// predicted pulls answered with the current weights. Expected values follow torch's formulas
// (exact for the SGD values chosen; a double-precision reference for Adam and AdamW).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

constexpr size_t kN = 4;  // one partition of 4 values
const std::vector<float> kInit = {1, -2, 1, 2};

proto::OptimizerSettings Sgd(double lr, double momentum = 0, double weight_decay = 0) {
  proto::OptimizerSettings s;
  s.set_kind(proto::OPTIMIZER_SGD);
  s.set_lr(lr);
  s.set_momentum(momentum);
  s.set_weight_decay(weight_decay);
  return s;
}

proto::OptimizerSettings Adam(proto::OptimizerKind kind, double lr, double weight_decay) {
  proto::OptimizerSettings s;
  s.set_kind(kind);
  s.set_lr(lr);
  s.set_weight_decay(weight_decay);
  s.set_beta1(0.9);
  s.set_beta2(0.999);
  s.set_eps(1e-8);
  return s;
}

// Runs ending at each pair's end with its settings.
proto::PartitionOptimizer Runs(
    const std::vector<std::pair<uint64_t, proto::OptimizerSettings>>& runs) {
  proto::PartitionOptimizer optimizer;
  for (const auto& [end, settings] : runs) {
    proto::OptimizerRun* run = optimizer.add_runs();
    run->set_end(end);
    *run->mutable_settings() = settings;
  }
  return optimizer;
}

// `first` on [0, 2) and `second` on [2, 4); `settings` on all 4.
proto::PartitionOptimizer TwoRuns(const proto::OptimizerSettings& first,
                                  const proto::OptimizerSettings& second) {
  return Runs({{2, first}, {4, second}});
}
proto::PartitionOptimizer OneRun(const proto::OptimizerSettings& settings) {
  return Runs({{kN, settings}});
}

// torch.optim.Adam / AdamW on kInit[begin, end) in double: AdamW first decays w *= 1 - lr wd,
// Adam adds wd w to the gradient d; m = b1 m + (1 - b1) d; v = b2 v + (1 - b2) d^2;
// w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
struct AdamReference {
  AdamReference(size_t begin, size_t end)
      : begin(begin), w(kInit.begin() + begin, kInit.begin() + end), m(w.size()), v(w.size()) {}
  void Step(const proto::OptimizerSettings& s, int t, const std::vector<float>& grad) {
    const bool decoupled = s.kind() == proto::OPTIMIZER_ADAMW;
    for (size_t i = 0; i < w.size(); ++i) {
      if (decoupled) w[i] *= 1 - s.lr() * s.weight_decay();
      const double d = grad[begin + i] + (decoupled ? 0 : s.weight_decay() * w[i]);
      m[i] = s.beta1() * m[i] + (1 - s.beta1()) * d;
      v[i] = s.beta2() * v[i] + (1 - s.beta2()) * d * d;
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(s.beta2(), t)) + s.eps();
      w[i] -= s.lr() / (1 - std::pow(s.beta1(), t)) * m[i] / denom;
    }
  }
  // Expects `weights[begin..]` to be the reference's.
  void ExpectWeights(const std::vector<float>& weights) const {
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_FLOAT_EQ(weights[begin + i], static_cast<float>(w[i])) << begin + i;
    }
  }
  size_t begin;
  std::vector<double> w, m, v;
};

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <typename T>
zmq::message_t Frame(const std::vector<T>& v) {
  return zmq::message_t(v.data(), v.size() * sizeof(T));
}

class ServerHandlerOptimizerTest : public ::testing::Test {
 protected:
  ServerHandlerOptimizerTest() {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(kN);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, kN * sizeof(float), 1));
  }

  // A server whose own optimizer (never used once a push carries runs) is plain SGD at 0.5.
  std::unique_ptr<ServerHandler> MakeHandler(proto::SyncMode sync, int workers,
                                             SgdOptions sgd = {0.5f, 0.0f, 0.0f}) {
    ServerOptions options;
    options.sgd = sgd;
    options.sync = sync;
    auto handler = std::make_unique<ServerHandler>(options);
    handler->Configure(0, ServerPeers{"scheduler", std::vector<std::string>(workers, "w")},
                       *layout_);
    EXPECT_TRUE(Push(*handler, 0, kInit, nullptr, 0, /*init=*/true).ok());
    return handler;
  }

  absl::Status Send(ServerHandler& handler, Message m) {
    Responder r(&sink_, "w", m.header);
    handler.HandleRequest(std::move(m), std::move(r));
    std::vector<std::pair<std::string, Message>> replies = sink_.Take();
    if (replies.empty()) return absl::OkStatus();  // parked
    last_reply_ = std::move(replies.back().second);
    return FromReplyHeader(last_reply_.header);
  }

  // A dense push of `grad` from worker `rank`, carrying `optimizer` unless null.
  absl::Status Push(ServerHandler& handler, int rank, const std::vector<float>& grad,
                    const proto::PartitionOptimizer* optimizer, int64_t clock = 0,
                    bool init = false) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    if (init) m.header.mutable_push()->set_init(true);
    if (optimizer != nullptr) *m.header.mutable_push()->mutable_optimizer() = *optimizer;
    m.payload.push_back(Frame(grad));
    return Send(handler, std::move(m));
  }

  // A top-k push (chunk == 0) or a csc push with chunks of `chunk`, carrying `optimizer`.
  absl::Status PushSparse(ServerHandler& handler, const std::vector<uint32_t>& ids,
                          const std::vector<float>& values, uint32_t chunk,
                          const proto::PartitionOptimizer& optimizer) {
    Message m = WorkerRequest(proto::PUSH, 0, 0);
    m.header.set_codec(chunk == 0 ? proto::TOPK : proto::CSC);
    if (chunk > 0) m.header.mutable_push()->set_chunk_elements(chunk);
    *m.header.mutable_push()->mutable_optimizer() = optimizer;
    m.payload.push_back(Frame(ids));
    m.payload.push_back(Frame(values));
    return Send(handler, std::move(m));
  }

  // The weights a pull answers (predicted for `predict_updates` more pushes when > 0).
  std::vector<float> Pull(ServerHandler& handler, int predict_updates = 0) {
    Message m = WorkerRequest(proto::PULL, 0, 0);
    if (predict_updates > 0) {
      m.header.mutable_pull()->set_predict_fraction(0.5f);
      m.header.mutable_pull()->set_predict_updates(predict_updates);
    }
    EXPECT_TRUE(Send(handler, std::move(m)).ok());
    std::vector<float> w(kN);
    EXPECT_EQ(last_reply_.payload.at(0).size(), kN * sizeof(float));
    std::memcpy(w.data(), last_reply_.payload[0].data(), kN * sizeof(float));
    return w;
  }

  static int64_t Version(const ServerHandler& handler) {
    return handler.Snapshot().partitions(0).version();
  }

  RecordingSink sink_;
  Message last_reply_;
  std::unique_ptr<ModelLayout> layout_;
};

TEST_F(ServerHandlerOptimizerTest, AspUpdatesEachRunByItsOwnRule) {
  auto handler = MakeHandler(proto::ASP, 1);
  const proto::OptimizerSettings adamw = Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.1);
  const proto::PartitionOptimizer runs = TwoRuns(Sgd(0.5, /*momentum=*/0.5), adamw);
  AdamReference ref(2, 4);
  const std::vector<float> g1 = {0.5f, 1, 2, -1};
  ASSERT_TRUE(Push(*handler, 0, g1, &runs).ok());
  ref.Step(adamw, 1, g1);
  std::vector<float> w = *handler->Weights(0);
  // SGD: buf = g (the first step), w -= 0.5 buf.
  EXPECT_EQ(w[0], 0.75f);
  EXPECT_EQ(w[1], -2.5f);
  // AdamW: w (1 - 0.01) - 0.1 sign(g).
  EXPECT_FLOAT_EQ(w[2], 0.89f);
  EXPECT_FLOAT_EQ(w[3], 2.08f);
  ref.ExpectWeights(w);

  const std::vector<float> g2 = {1, -0.5f, -1, 0.5f};
  ASSERT_TRUE(Push(*handler, 0, g2, &runs).ok());
  ref.Step(adamw, 2, g2);
  w = *handler->Weights(0);
  // SGD: buf = 0.5 {0.5, 1} + {1, -0.5} = {1.25, 0}.
  EXPECT_EQ(w[0], 0.125f);
  EXPECT_EQ(w[1], -2.5f);
  ref.ExpectWeights(w);
  EXPECT_EQ(Version(*handler), 2);
}

TEST_F(ServerHandlerOptimizerTest, BspAppliesTheClocksAverageWithTheRuns) {
  auto handler = MakeHandler(proto::BSP, 2);
  const proto::OptimizerSettings adam = Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01);
  const proto::PartitionOptimizer runs = TwoRuns(Sgd(0.5, 0, /*weight_decay=*/0.25), adam);
  AdamReference ref(2, 4);
  ASSERT_TRUE(Push(*handler, 0, {1, 2, 3, -1}, &runs, /*clock=*/0).ok());
  EXPECT_TRUE(BitIdentical(*handler->Weights(0), kInit));  // the clock waits for worker 1
  ASSERT_TRUE(Push(*handler, 1, {0, 1, 1, -3}, &runs, 0).ok());
  const std::vector<float> avg0 = {0.5f, 1.5f, 2, -2};
  ref.Step(adam, 1, avg0);
  std::vector<float> w = *handler->Weights(0);
  // SGD: d = avg + 0.25 w = {0.75, 1}; w -= 0.5 d.
  EXPECT_EQ(w[0], 0.625f);
  EXPECT_EQ(w[1], -2.5f);
  EXPECT_FLOAT_EQ(w[2], 0.9f);  // Adam's first step: lr against the sign
  EXPECT_FLOAT_EQ(w[3], 2.1f);
  ref.ExpectWeights(w);

  // Clock 1 comes with halved rates: its update uses them.
  const proto::OptimizerSettings slower_adam = Adam(proto::OPTIMIZER_ADAM, 0.05, 0.01);
  const proto::PartitionOptimizer slower = TwoRuns(Sgd(0.25, 0, 0.25), slower_adam);
  ASSERT_TRUE(Push(*handler, 0, {0.25f, -0.5f, 1, 1}, &slower, 1).ok());
  ASSERT_TRUE(Push(*handler, 1, {0.75f, 0.5f, -1, 3}, &slower, 1).ok());
  ref.Step(slower_adam, 2, {0.5f, 0, 0, 2});
  w = *handler->Weights(0);
  // d = {0.5, 0} + 0.25 {0.625, -2.5} = {0.65625, -0.625}; w -= 0.25 d.
  EXPECT_EQ(w[0], 0.4609375f);
  EXPECT_EQ(w[1], -2.34375f);
  ref.ExpectWeights(w);
  EXPECT_EQ(Version(*handler), 2);
}

TEST_F(ServerHandlerOptimizerTest, ALaterPushsLearningRateTakesEffectAtItsUpdate) {
  auto handler = MakeHandler(proto::ASP, 1);
  const proto::PartitionOptimizer fast = OneRun(Sgd(0.5));
  const proto::PartitionOptimizer slow = OneRun(Sgd(0.25));
  ASSERT_TRUE(Push(*handler, 0, {1, 1, 1, 1}, &fast).ok());
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0.5f, -2.5f, 0.5f, 1.5f}));
  ASSERT_TRUE(Push(*handler, 0, {1, 1, 1, 1}, &slow).ok());
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0.25f, -2.75f, 0.25f, 1.25f}));
  ASSERT_TRUE(Push(*handler, 0, {-1, -1, -1, -1}, &fast).ok());
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0.75f, -2.25f, 0.75f, 1.75f}));
}

// Malformed runs are refused before anything is applied: weights, moments and version stay as
// they were, and the next good push is the partition's second update.
TEST_F(ServerHandlerOptimizerTest, MalformedRunsAreRefusedAndChangeNothing) {
  auto handler = MakeHandler(proto::ASP, 1);
  const proto::OptimizerSettings adamw = Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.1);
  const proto::PartitionOptimizer runs = TwoRuns(Sgd(0.5, 0.5), adamw);
  AdamReference ref(2, 4);
  const std::vector<float> g1 = {0.5f, 1, 2, -1};
  ASSERT_TRUE(Push(*handler, 0, g1, &runs).ok());
  ref.Step(adamw, 1, g1);
  const proto::ShardCheckpoint before = handler->Snapshot();

  std::vector<proto::PartitionOptimizer> bad;
  bad.push_back(proto::PartitionOptimizer());  // present, with no runs
  bad.push_back(runs);
  bad.back().mutable_runs(1)->set_end(3);  // short of the partition
  bad.push_back(runs);
  bad.back().mutable_runs(1)->set_end(5);  // past it
  bad.push_back(runs);
  bad.back().mutable_runs(0)->set_end(0);  // an empty run
  bad.push_back(runs);
  bad.back().mutable_runs(1)->mutable_settings()->set_lr(std::nan(""));
  bad.push_back(runs);
  bad.back().mutable_runs(0)->mutable_settings()->set_kind(proto::OPTIMIZER_UNSPECIFIED);
  for (const proto::PartitionOptimizer& optimizer : bad) {
    const absl::Status status = Push(*handler, 0, {9, 9, 9, 9}, &optimizer);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status << " " << optimizer.ShortDebugString();
  }
  const proto::ShardCheckpoint after = handler->Snapshot();
  const proto::PartitionCheckpoint& b = before.partitions(0);
  const proto::PartitionCheckpoint& a = after.partitions(0);
  EXPECT_EQ(a.weights(), b.weights());  // bit for bit
  EXPECT_EQ(a.momentum(), b.momentum());
  EXPECT_EQ(a.second_moment(), b.second_moment());
  EXPECT_EQ(a.version(), 1);
  EXPECT_EQ(a.steps(), 1.0);
  EXPECT_EQ(handler->counters().dropped_messages(), bad.size());

  const std::vector<float> g2 = {1, -0.5f, -1, 0.5f};
  ASSERT_TRUE(Push(*handler, 0, g2, &runs).ok());
  ref.Step(adamw, 2, g2);  // update 2's bias correction
  const std::vector<float> w = *handler->Weights(0);
  EXPECT_EQ(w[0], 0.125f);
  EXPECT_EQ(w[1], -2.5f);
  ref.ExpectWeights(w);
}

TEST_F(ServerHandlerOptimizerTest, MalformedRunsAddNothingToABspClock) {
  auto handler = MakeHandler(proto::BSP, 2);
  const proto::PartitionOptimizer runs = OneRun(Sgd(0.5));
  proto::PartitionOptimizer bad = runs;
  bad.mutable_runs(0)->set_end(3);
  EXPECT_TRUE(absl::IsInvalidArgument(Push(*handler, 0, {8, 8, 8, 8}, &bad, 0)));
  ASSERT_TRUE(Push(*handler, 0, {1, 2, 3, 4}, &runs, 0).ok());  // worker 0's push for clock 0
  ASSERT_TRUE(Push(*handler, 1, {3, 2, 1, 0}, &runs, 0).ok());
  // The average of the two good pushes, {2, 2, 2, 2}, at lr 0.5.
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0, -3, 0, 1}));
  EXPECT_EQ(Version(*handler), 1);
}

// Top-k and csc pushes with runs move the weights (and the moments) bit for bit as the dense
// push with zeros elsewhere does: the untouched values get a zero gradient, as in torch.
TEST_F(ServerHandlerOptimizerTest, SparsePushWithRunsMatchesTheDensePush) {
  const proto::PartitionOptimizer runs =
      TwoRuns(Sgd(0.5, 0.5, 0.25), Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01));
  for (uint32_t chunk : {0u, 2u}) {
    auto sparse = MakeHandler(proto::ASP, 1);
    auto dense = MakeHandler(proto::ASP, 1);
    // (ids, values) and the same gradient dense; csc chunks of 2 are elements {0, 1}, {2, 3}.
    struct Case {
      std::vector<uint32_t> ids;
      std::vector<float> values, dense;
    };
    const std::vector<Case> cases =
        chunk == 0 ? std::vector<Case>{{{1, 2}, {1, -2}, {0, 1, -2, 0}},
                                       {{0, 3}, {0.5f, 1}, {0.5f, 0, 0, 1}}}
                   : std::vector<Case>{{{1}, {0.5f, -1}, {0, 0, 0.5f, -1}},
                                       {{0}, {2, -0.25f}, {2, -0.25f, 0, 0}}};
    for (const Case& c : cases) {
      ASSERT_TRUE(PushSparse(*sparse, c.ids, c.values, chunk, runs).ok());
      ASSERT_TRUE(Push(*dense, 0, c.dense, &runs).ok());
      EXPECT_TRUE(BitIdentical(*sparse->Weights(0), *dense->Weights(0))) << chunk;
    }
    const proto::PartitionCheckpoint s = sparse->Snapshot().partitions(0);
    const proto::PartitionCheckpoint d = dense->Snapshot().partitions(0);
    EXPECT_EQ(s.momentum(), d.momentum()) << chunk;
    EXPECT_EQ(s.second_moment(), d.second_moment()) << chunk;
    EXPECT_FALSE(BitIdentical(*sparse->Weights(0), kInit));
  }
  // The values' arithmetic for the top-k case's SGD run (elements 0 and 1, wd 0.25):
  // push 1: d = {0.25, 1 - 0.5} = {0.25, 0.5} = buf; w = {0.875, -2.25};
  // push 2: d = {0.5 + 0.21875, -0.5625}; buf = {0.125 + 0.71875, 0.25 - 0.5625}.
  auto sparse = MakeHandler(proto::ASP, 1);
  ASSERT_TRUE(PushSparse(*sparse, {1, 2}, {1, -2}, 0, runs).ok());
  ASSERT_TRUE(PushSparse(*sparse, {0, 3}, {0.5f, 1}, 0, runs).ok());
  const std::vector<float> w = *sparse->Weights(0);
  EXPECT_EQ(w[0], 0.453125f);  // 0.875 - 0.5 * 0.84375
  EXPECT_EQ(w[1], -2.09375f);  // -2.25 + 0.5 * 0.3125
}

// A checkpoint after two Adam updates holds the first and second moments; a fresh server restored
// from it and given the same third push ends bit for bit where the original does.
TEST_F(ServerHandlerOptimizerTest, CheckpointCarriesAdamsMomentsAcrossARestore) {
  auto original = MakeHandler(proto::ASP, 1);
  const proto::OptimizerSettings adam = Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01);
  const proto::PartitionOptimizer runs = TwoRuns(adam, Sgd(0.5, /*momentum=*/0.5));
  AdamReference ref(0, 2);
  const std::vector<std::vector<float>> grads = {
      {0.5f, 1, 2, -1}, {1, -0.5f, -0.5f, 0.5f}, {-0.25f, 0.75f, 1, 1}};
  for (int t = 1; t <= 2; ++t) {
    ASSERT_TRUE(Push(*original, 0, grads[t - 1], &runs).ok());
    ref.Step(adam, t, grads[t - 1]);
  }
  const proto::ShardCheckpoint shard = original->Snapshot();
  ASSERT_EQ(shard.partitions_size(), 1);
  const proto::PartitionCheckpoint& p = shard.partitions(0);
  EXPECT_EQ(p.version(), 2);
  ASSERT_EQ(p.momentum().size(), kN * sizeof(float));  // saved though the server's sgd has none
  ASSERT_EQ(p.second_moment().size(), kN * sizeof(float));
  const std::vector<float> first = Floats(p.momentum());
  const std::vector<float> second = Floats(p.second_moment());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(first[i], static_cast<float>(ref.m[i])) << i;   // Adam's exp_avg
    EXPECT_FLOAT_EQ(second[i], static_cast<float>(ref.v[i])) << i;  // and exp_avg_sq
  }
  // SGD's buffer: {2, -1}, then 0.5 {2, -1} + {-0.5, 0.5}; it has no second moment.
  EXPECT_EQ(first[2], 0.5f);
  EXPECT_EQ(first[3], 0.0f);
  EXPECT_EQ(second[2], 0.0f);
  EXPECT_EQ(second[3], 0.0f);

  auto restored = MakeHandler(proto::ASP, 1);
  ASSERT_TRUE(restored->Restore(shard).ok());
  const proto::ShardCheckpoint restored_before_push = restored->Snapshot();
  EXPECT_TRUE(BitIdentical(*restored->Weights(0), *original->Weights(0)));
  ASSERT_TRUE(Push(*original, 0, grads[2], &runs).ok());
  ASSERT_TRUE(Push(*restored, 0, grads[2], &runs).ok());
  EXPECT_TRUE(BitIdentical(*restored->Weights(0), *original->Weights(0)));
  EXPECT_EQ(Version(*restored), 3);
  ref.Step(adam, 3, grads[2]);
  ref.ExpectWeights(*original->Weights(0));
  // SGD: w = {1 - 1, 2 + 0.5} - 0.5 {0.5, 0} - 0.5 {1.25, 1}.
  EXPECT_EQ((*original->Weights(0))[2], -0.875f);
  EXPECT_EQ((*original->Weights(0))[3], 2.0f);

  // A checkpoint of the restored server before any push still holds both moments.
  const proto::PartitionCheckpoint again = restored_before_push.partitions(0);
  EXPECT_EQ(again.momentum(), p.momentum());
  EXPECT_EQ(again.second_moment(), p.second_moment());

  // Without the second moment the third update would differ: the checkpoint needs it.
  proto::ShardCheckpoint no_second = shard;
  no_second.mutable_partitions(0)->clear_second_moment();
  auto forgetful = MakeHandler(proto::ASP, 1);
  ASSERT_TRUE(forgetful->Restore(no_second).ok());
  ASSERT_TRUE(Push(*forgetful, 0, grads[2], &runs).ok());
  EXPECT_NE((*forgetful->Weights(0))[0], (*original->Weights(0))[0]);
}

// A predicted pull (r2sp's delay compensation) on a partition the script's optimizer updates
// answers the current weights where that optimizer is not the server's SGD (nesterov here):
// the server's momentum rule does not predict it.
TEST_F(ServerHandlerOptimizerTest, PredictedPullWithRunsAnswersTheCurrentWeights) {
  auto handler = MakeHandler(proto::ASP, 1, SgdOptions{0.5f, 0.9f, 0.0f});
  EXPECT_EQ(Pull(*handler, /*predict_updates=*/2), kInit);
  proto::OptimizerSettings nesterov = Sgd(0.5, 0.5);
  nesterov.set_nesterov(true);
  const proto::PartitionOptimizer runs = OneRun(nesterov);
  ASSERT_TRUE(Push(*handler, 0, {1, 1, 1, 1}, &runs).ok());  // buf = 1, d = 1.5, w -= 0.75
  EXPECT_EQ(Pull(*handler, 2), (std::vector<float>{0.25f, -2.75f, 0.25f, 1.25f}));
  EXPECT_EQ(last_reply_.header.clock(), 1);  // the version
  ASSERT_TRUE(Push(*handler, 0, {1, 1, 1, 1}, &runs).ok());  // buf = 1.5, d = 1.75
  EXPECT_EQ(Pull(*handler, 3), (std::vector<float>{-0.625f, -3.625f, -0.625f, 0.375f}));
  EXPECT_EQ(Pull(*handler), (std::vector<float>{-0.625f, -3.625f, -0.625f, 0.375f}));
}

// A predicted pull of a partition the script's Adam updates answers where the weights will
// be after the asked-for updates, each moving as the latest moments say:
//   w - k lr f m^ / (sqrt(v^) + eps), bias corrected at the partition's steps.
TEST_F(ServerHandlerOptimizerTest, APredictedPullOfAdamMovesAsItsMomentsSay) {
  auto handler = MakeHandler(proto::ASP, 1);
  const proto::OptimizerSettings adam = Adam(proto::OPTIMIZER_ADAM, 0.1, 0);
  const proto::PartitionOptimizer runs = OneRun(adam);
  ASSERT_TRUE(Push(*handler, 0, {0.5f, 1, 2, -1}, &runs).ok());
  ASSERT_TRUE(Push(*handler, 0, {1, -0.5f, -0.5f, 0.5f}, &runs).ok());  // 2 whole steps
  const proto::PartitionCheckpoint state = handler->Snapshot().partitions(0);
  const std::vector<float> w = *handler->Weights(0);
  const std::vector<float> m = Floats(state.momentum()), v = Floats(state.second_moment());
  // Pull(): 2 updates carrying 0.5 of a step between them, 0.25 each.
  const std::vector<float> predicted = Pull(*handler, /*predict_updates=*/2);
  const double c1 = 1 - std::pow(0.9, 2), c2 = 1 - std::pow(0.999, 2);
  for (size_t i = 0; i < kN; ++i) {
    const double move = 2 * 0.1 * 0.25 * (m[i] / c1) / (std::sqrt(v[i] / c2) + 1e-8);
    EXPECT_NEAR(predicted[i], w[i] - move, 1e-6) << i;
    EXPECT_NE(predicted[i], w[i]) << i;
  }
  EXPECT_EQ(Pull(*handler), w);  // a plain pull: the current weights
}

// A script's SGD that is the server's (no dampening, no nesterov, one rate) updates and
// predicts as the server's own SGD with those settings does, bit for bit: r2sp's predicted
// pulls keep working for Python workers.
TEST_F(ServerHandlerOptimizerTest, AScriptsPlainSgdPredictsAsTheServersOwn) {
  auto scripted = MakeHandler(proto::ASP, 1, SgdOptions{0.1f, 0.0f, 0.0f});
  auto own = MakeHandler(proto::ASP, 1, SgdOptions{0.5f, 0.5f, 0.25f});
  const proto::PartitionOptimizer runs = OneRun(Sgd(0.5, 0.5, 0.25));
  const std::vector<std::vector<float>> grads = {{1, -1, 0.5f, 2}, {0.25f, 3, -1, 1}};
  for (const std::vector<float>& g : grads) {
    EXPECT_EQ(Pull(*scripted, /*predict_updates=*/3), Pull(*own, 3));
    ASSERT_TRUE(Push(*scripted, 0, g, &runs).ok());
    ASSERT_TRUE(Push(*own, 0, g, nullptr).ok());
    EXPECT_TRUE(BitIdentical(*scripted->Weights(0), *own->Weights(0)));
  }
  const std::vector<float> predicted = Pull(*own, 3);
  EXPECT_EQ(Pull(*scripted, 3), predicted);
  EXPECT_NE(predicted, *own->Weights(0));  // a prediction, not the current weights
}

}  // namespace
}  // namespace r2sp
