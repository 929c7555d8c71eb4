// The server's side of the sparse codecs (top-k pairs and csc chunks): a sparse push moves the
// weights as the dense push of the same gradient does (momentum, weight decay and the predicted
// pulls' step term included) in asynchronous modes, adds into BSP's per-clock sum beside dense
// and other sparse pushes, and a malformed one is refused and counted with the weights and the
// clock's sum untouched (checked bit for bit).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

constexpr size_t kN = 10;  // one partition of 10 values; csc chunks of 4 (the last one: 2)

template <typename T>
zmq::message_t Frame(const std::vector<T>& v) {
  return zmq::message_t(v.data(), v.size() * sizeof(T));
}

std::vector<float> Densify(const std::vector<uint32_t>& ids, const std::vector<float>& values,
                           uint32_t chunk) {
  std::vector<float> dense(kN, 0.0f);
  size_t next = 0;
  for (uint32_t id : ids) {
    if (chunk == 0) {
      dense[id] = values[next++];
    } else {
      for (size_t i = size_t{id} * chunk; i < std::min<size_t>(kN, (id + 1) * chunk); ++i) {
        dense[i] = values[next++];
      }
    }
  }
  return dense;
}

class ServerHandlerSparseTest : public ::testing::Test {
 protected:
  std::unique_ptr<ServerHandler> MakeHandler(proto::SyncMode sync, int workers,
                                             SgdOptions sgd) {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(kN);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, 1 << 20, 1));
    ServerOptions options;
    options.sgd = sgd;
    options.sync = sync;
    auto handler = std::make_unique<ServerHandler>(options);
    handler->Configure(0, ServerPeers{"scheduler", std::vector<std::string>(workers, "w")},
                       *layout_);
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

  absl::Status PushDense(ServerHandler& handler, int rank, const std::vector<float>& values,
                         bool init = false, int64_t clock = 0, float scale = 0) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    if (init) m.header.mutable_push()->set_init(true);
    if (scale > 0) m.header.mutable_push()->set_scale(scale);
    m.payload.push_back(Frame(values));
    return Send(handler, std::move(m));
  }

  // A top-k push (chunk == 0) or a csc push with chunks of `chunk`.
  static Message SparsePush(int rank, const std::vector<uint32_t>& ids,
                            const std::vector<float>& values, uint32_t chunk, int64_t clock = 0,
                            float scale = 0) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    m.header.set_codec(chunk == 0 ? proto::TOPK : proto::CSC);
    if (chunk > 0) m.header.mutable_push()->set_chunk_elements(chunk);
    if (scale > 0) m.header.mutable_push()->set_scale(scale);
    m.payload.push_back(Frame(ids));
    m.payload.push_back(Frame(values));
    return m;
  }

  std::vector<float> Pull(ServerHandler& handler, float predict_fraction = 0) {
    Message m = WorkerRequest(proto::PULL, 0, 0);
    if (predict_fraction > 0) {
      m.header.mutable_pull()->set_predict_fraction(predict_fraction);
      m.header.mutable_pull()->set_predict_updates(2);
    }
    EXPECT_TRUE(Send(handler, std::move(m)).ok());
    std::vector<float> w(kN);
    EXPECT_EQ(last_reply_.payload.at(0).size(), kN * sizeof(float));
    std::memcpy(w.data(), last_reply_.payload[0].data(), kN * sizeof(float));
    return w;
  }

  // Pushes the same gradients sparse to one server and dense to another (both asynchronous, with
  // momentum and weight decay, scaled pushes as r2sp sends them) and compares weights and
  // predicted pulls after each push.
  void ExpectSparseMatchesDense(uint32_t chunk) {
    const SgdOptions sgd{0.1f, 0.9f, 0.01f};
    auto sparse = MakeHandler(proto::R2SP, 1, sgd);
    auto dense = MakeHandler(proto::R2SP, 1, sgd);
    const std::vector<float> init = {1, -1, 2, -2, 0.5f, 3, -3, 0.25f, 4, -4};
    ASSERT_TRUE(PushDense(*sparse, 0, init, /*init=*/true).ok());
    ASSERT_TRUE(PushDense(*dense, 0, init, /*init=*/true).ok());
    Pull(*sparse, 0.5f);  // predicted pulls: updates keep their step term from now on
    Pull(*dense, 0.5f);
    const std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> pushes =
        chunk == 0 ? std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>>{
                         {{1, 5}, {2, -4}}, {{0, 9}, {0.5f, 1}}, {{}, {}}, {{5}, {-3}}}
                   : std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>>{
                         {{0}, {1, 2, 3, 4}}, {{2}, {5, -5}}, {{1, 2}, {1, 1, 1, 1, -1, -1}}};
    for (const auto& [ids, values] : pushes) {
      ASSERT_TRUE(Send(*sparse, SparsePush(0, ids, values, chunk, 0,
                                                                       0.25f))
                      .ok());
      ASSERT_TRUE(PushDense(*dense, 0, Densify(ids, values, chunk), false, 0, 0.25f).ok());
      const std::vector<float> ws = Pull(*sparse), wd = Pull(*dense);
      const std::vector<float> ps = Pull(*sparse, 0.5f), pd = Pull(*dense, 0.5f);
      for (size_t i = 0; i < kN; ++i) {
        EXPECT_NEAR(ws[i], wd[i], 1e-6f * (1 + std::fabs(wd[i]))) << i;
        EXPECT_NEAR(ps[i], pd[i], 1e-6f * (1 + std::fabs(pd[i]))) << i;
      }
      EXPECT_NE(ws, init);
    }
  }

  RecordingSink sink_;
  Message last_reply_;
  std::unique_ptr<ModelLayout> layout_;
};

TEST_F(ServerHandlerSparseTest, AsyncTopKMovesWeightsAsTheDenseGradientDoes) {
  ExpectSparseMatchesDense(0);
}

TEST_F(ServerHandlerSparseTest, AsyncCscMovesWeightsAsTheDenseGradientDoes) {
  ExpectSparseMatchesDense(4);
}

TEST_F(ServerHandlerSparseTest, BspSumsTopKCscAndDensePushesOfAClock) {
  auto handler = MakeHandler(proto::BSP, 3, {0.5f, 0.0f, 0.0f});
  ASSERT_TRUE(PushDense(*handler, 0, std::vector<float>(kN, 0.0f), /*init=*/true).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(0, {1, 9}, {3, 6}, 0)).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(1, {2}, {3, 3}, 4)).ok());  // chunk 2: values 8, 9
  EXPECT_EQ(Pull(*handler), std::vector<float>(kN, 0.0f));  // the clock is not complete yet
  ASSERT_TRUE(PushDense(*handler, 2, std::vector<float>(kN, 3.0f)).ok());
  // The average of the three, at lr 0.5.
  const std::vector<float> want = {-0.5f, -1, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -1, -2};
  EXPECT_EQ(Pull(*handler), want);
  // The next clock starts from a clean sum, even when its first push is sparse.
  ASSERT_TRUE(Send(*handler, SparsePush(0, {0}, {3}, 0, /*clock=*/1)).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(1, {}, {}, 0, 1)).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(2, {}, {}, 4, 1)).ok());
  std::vector<float> next = want;
  next[0] -= 0.5f;
  EXPECT_EQ(Pull(*handler), next);
}

TEST_F(ServerHandlerSparseTest, BspWeightedSparsePushesSumAsWeighted) {
  auto handler = MakeHandler(proto::BSP, 2, {1.0f, 0.0f, 0.0f});
  ASSERT_TRUE(PushDense(*handler, 0, std::vector<float>(kN, 0.0f), /*init=*/true).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(0, {4}, {8}, 0, 0, /*scale=*/0.25f)).ok());
  ASSERT_TRUE(Send(*handler, SparsePush(1, {1}, {4, 4, 4, 4}, 4, 0, /*scale=*/0.75f)).ok());
  const std::vector<float> w = Pull(*handler);
  EXPECT_EQ(w[4], -2.0f - 3.0f);  // 0.25 * 8 from worker 0, 0.75 * 4 from worker 1's chunk
  EXPECT_EQ(w[5], -3.0f);
  EXPECT_EQ(w[0], 0.0f);
}

uint64_t Checksum(const std::vector<float>& w) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  for (size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

TEST_F(ServerHandlerSparseTest, MalformedSparsePushesAreRefusedCountedAndChangeNothing) {
  for (proto::SyncMode sync : {proto::ASP, proto::BSP}) {
    auto handler = MakeHandler(sync, 1, {0.5f, 0.9f, 0.0f});
    ASSERT_TRUE(PushDense(*handler, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, /*init=*/true).ok());
    const uint64_t before = Checksum(*handler->Weights(0));
    std::vector<Message> bad;
    bad.push_back(SparsePush(0, {1, 10}, {1, 1}, 0));         // index out of range
    bad.push_back(SparsePush(0, {3, 3}, {1, 1}, 0));          // duplicate
    bad.push_back(SparsePush(0, {4, 2}, {1, 1}, 0));          // unsorted
    bad.push_back(SparsePush(0, {1, 2}, {1}, 0));             // count mismatch
    bad.push_back(SparsePush(0, {3}, {1, 1, 1, 1}, 4));       // chunk id past the partition
    bad.push_back(SparsePush(0, {2}, {1, 1, 1, 1}, 4));       // short chunk sent long
    bad.push_back(SparsePush(0, {1}, {1, std::nanf(""), 1, 1}, 4));  // non-finite
    Message truncated = SparsePush(0, {1, 2}, {1, 1}, 0);
    truncated.payload[1] = zmq::message_t(truncated.payload[1].data(), 6);
    bad.push_back(std::move(truncated));
    Message unknown = SparsePush(0, {1}, {1}, 0);
    unknown.header.set_codec(static_cast<proto::Codec>(17));
    bad.push_back(std::move(unknown));
    const size_t count = bad.size();
    for (Message& m : bad) EXPECT_TRUE(absl::IsInvalidArgument(Send(*handler, std::move(m))));
    EXPECT_EQ(Checksum(*handler->Weights(0)), before);
    EXPECT_EQ(handler->counters().dropped_messages(), count);
    EXPECT_EQ(handler->counters().pushes(), 1u);  // the initial values only
    // In BSP the clock's sum is untouched too: a good push now completes clock 0 on its own.
    ASSERT_TRUE(Send(*handler, SparsePush(0, {0}, {2}, 0)).ok());
    const std::vector<float> w = *handler->Weights(0);
    EXPECT_EQ(w[0], 0.0f);
    EXPECT_EQ(w[1], 2.0f);
  }
}

}  // namespace
}  // namespace r2sp
