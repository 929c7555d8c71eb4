// Fuzz target: the scheduler's protocol logic (scheduler/scheduler_core.h) fed whatever
// arrives from a few peers' connections (frames through DecodeFrames, then HandleRequest),
// with the clock moving, OnTick, and the servers' answers to its own requests (SHUTDOWN,
// MEMBERSHIP) coming back, in time or not. Input: an options byte (servers, workers, mode,
// hetero batching, slot order or epoch plans, server replacement), then operations
// (fuzz_input.h).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/message.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/testing/fakes.h"

namespace r2sp::fuzz {
namespace {

// The construction against the handler API (Responder with the role CURVE authenticated):
// the one place to adapt when it changes.
Responder MakeResponder(ReplySink* sink, const std::string& routing_id, const proto::Header& header,
                        proto::Role authenticated_role) {
  return Responder(sink, routing_id, header, authenticated_role);
}

const char* const kPeers[] = {"s0", "s1", "w0", "w1", "w2", "w3"};

// The answer a server gives to one of the scheduler's requests: OK (with counters, and a clock
// a join's prepare reads, negative ones included), an error code, or none at all (the request
// timed out).
absl::StatusOr<Message> AnswerFor(uint8_t how) {
  if (how % 3 == 2) return absl::DeadlineExceededError("no answer");
  Message reply;
  reply.header.set_is_reply(true);
  reply.header.set_code(how % 3 == 0 ? proto::OK : proto::INTERNAL);
  reply.header.mutable_counters()->set_pushes(how);
  reply.header.set_clock(static_cast<int64_t>(how) - 16);
  return reply;
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  const uint8_t config = in.Byte();
  static constexpr proto::SyncMode kModes[] = {proto::ASP, proto::BSP, proto::SSP, proto::R2SP};
  SchedulerOptions options;
  options.num_servers = 1 + (config & 1);
  options.num_workers = 1 + ((config >> 1) & 3) % 3;
  options.sync = kModes[(config >> 3) & 3];
  options.slots.hetero_batching = (config & 0x20) != 0;
  options.slots.order = (config & 0x40) != 0 ? SlotOrder::kFirstCome : SlotOrder::kRing;
  options.slots.width = options.num_servers == 2 ? 0 : 1;  // the same bit: a tuned width
  // The same bit, in the other modes (which have no slot order): epoch plans (EPOCH_PLAN).
  options.absorb_orphaned_shards = options.sync != proto::R2SP && (config & 0x40) != 0;
  // Lost servers awaited and replaced by servers registering later.
  options.server_replace_timeout = (config & 0x80) != 0 ? absl::Seconds(30) : absl::ZeroDuration();
  options.staleness = 2;
  options.slots.batching.global_batch = 64;
  options.slots.batching.min_batch = 4;
  options.slots.batching.max_batch = 128;
  absl::Time now = absl::FromUnixSeconds(1000);
  testing::RecordingSink sink;
  testing::RecordingRequester requester;
  SchedulerCore core(options, &requester, [&now] { return now; });
  size_t answered = 0;  // requester.sent[0, answered) have had their answer
  for (int ops = 0; ops < 96 && !in.empty(); ++ops) {
    const uint8_t op = in.Byte();
    switch (op % 8) {
      case 6:
        now += absl::Milliseconds(in.U16() * 4);
        core.OnTick(now);
        (void)core.NextWakeup();
        break;
      case 7:
        if (answered < requester.sent.size()) {
          // Out of order, as servers answer.
          const size_t i = answered + in.Byte() % (requester.sent.size() - answered);
          std::swap(requester.sent[answered], requester.sent[i]);
          ReplyCallback callback = std::move(requester.sent[answered++].callback);
          callback(fuzz::AnswerFor(in.Byte()));
        }
        break;
      default: {
        const std::string peer = fuzz::kPeers[(op >> 3) % 8 % 6];
        std::vector<zmq::message_t> frames = fuzz::TakeFrames(in);
        absl::StatusOr<Message> request = DecodeFrames(frames, DecodeLimits());
        if (!request.ok()) break;
        // Without CURVE, or (op's top bit) with the role the peer's key proved.
        const proto::Role role =
            (op & 0x80) != 0 ? static_cast<proto::Role>(in.Byte() % 4) : proto::ROLE_UNSPECIFIED;
        Responder responder = fuzz::MakeResponder(&sink, peer, request->header, role);
        core.HandleRequest(*std::move(request), std::move(responder));
      }
    }
    for (auto& [routing_id, reply] : sink.Take()) CHECK(reply.header.is_reply());
  }
  (void)core.ReportJson();
  (void)core.failure();
  return 0;
}
