// Seeds for the protocol handlers (server_handler, scheduler_core) and for message_header: the
// message sequences of short jobs in each mode, as the targets read them (see their files).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/codec/fp16.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/seeds.h"

namespace r2sp::fuzz {

std::string Frames(Message msg) {
  std::vector<std::string> frames;
  const zmq::message_t head = EncodeHeader(msg);
  frames.emplace_back(static_cast<const char*>(head.data()), head.size());
  for (const zmq::message_t& f : msg.payload) {
    frames.emplace_back(static_cast<const char*>(f.data()), f.size());
  }
  std::string out;
  AppendFrames(&out, frames);
  return out;
}

zmq::message_t FloatFrame(const std::vector<float>& values) {
  return zmq::message_t(values.data(), values.size() * sizeof(float));
}

zmq::message_t HalfFrame(const std::vector<float>& values) {
  std::vector<uint16_t> half(values.size());
  codec::EncodeFp16(values.data(), values.size(), half.data());
  return zmq::message_t(half.data(), half.size() * sizeof(uint16_t));
}

namespace {

// An options byte, then operations: a message from peer P is the op byte P << 3 and its
// frames; other ops are written as they are.
class Ops {
 public:
  explicit Ops(uint8_t config) { out_.push_back(static_cast<char>(config)); }
  Ops& Send(int peer, Message m) {
    out_.push_back(static_cast<char>(peer << 3));
    out_ += Frames(std::move(m));
    return *this;
  }
  Ops& Byte(uint8_t b) {
    out_.push_back(static_cast<char>(b));
    return *this;
  }
  Ops& U16(uint16_t v) { return Byte(v & 0xff).Byte(v >> 8); }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

Message From(proto::Role role, int rank, proto::MsgType type, uint64_t key = 0) {
  Message m;
  m.header.set_type(type);
  m.header.set_sender_role(role);
  m.header.set_sender_rank(rank);
  m.header.set_key(key);
  return m;
}

Message Push(int rank, uint64_t key, const std::vector<float>& values, bool init = false,
             int64_t clock = 0, float scale = 0) {
  Message m = From(proto::WORKER, rank, proto::PUSH, key);
  m.header.set_clock(clock);
  if (init) m.header.mutable_push()->set_init(true);
  if (scale != 0) m.header.mutable_push()->set_scale(scale);
  m.payload.push_back(FloatFrame(values));
  return m;
}

Message Pull(int rank, uint64_t key, proto::Codec codec = proto::FP32, int64_t min_version = 0,
             int64_t min_clock = 0) {
  Message m = From(proto::WORKER, rank, proto::PULL, key);
  m.header.set_codec(codec);
  m.header.mutable_pull()->set_min_version(min_version);
  m.header.mutable_pull()->set_min_clock(min_clock);
  return m;
}

Message Sparse(int rank, uint64_t key, proto::Codec codec, const std::vector<uint32_t>& ids,
               const std::vector<float>& values, bool half, uint32_t chunk = 0) {
  Message m = From(proto::WORKER, rank, proto::PUSH, key);
  m.header.set_codec(codec);
  m.header.mutable_push()->set_values(half ? proto::FP16 : proto::FP32);
  if (chunk != 0) m.header.mutable_push()->set_chunk_elements(chunk);
  m.payload.push_back(zmq::message_t(ids.data(), ids.size() * sizeof(uint32_t)));
  m.payload.push_back(half ? HalfFrame(values) : FloatFrame(values));
  return m;
}

// server_handler's layout: keys 0, 1, 2 of 3 floats, key 3 of 2. Peers: w0, w1, w2, scheduler.
constexpr int kScheduler = 3;

Ops InitAll(uint8_t config) {
  Ops ops(config);
  for (uint64_t key = 0; key < 4; ++key) {
    ops.Send(0, Push(0, key, std::vector<float>(key == 3 ? 2 : 3, 0.5f), /*init=*/true));
  }
  return ops;
}

void AddServerSeeds(Seeds* seeds) {
  auto& s = (*seeds)["server_handler"];
  constexpr uint8_t kTwoWorkers = 1 << 5, kMomentum = 4;
  // asp: pushes and pulls in every codec, a predicted pull, a snapshot.
  Ops asp = InitAll(0 | kMomentum | kTwoWorkers);
  asp.Send(0, Push(0, 0, {1, 2, 3}, false, 0, 0.5f)).Send(1, Pull(1, 0, proto::FP16));
  asp.Send(1, Sparse(1, 1, proto::TOPK, {0, 2}, {1, -1}, false)).Send(0, Pull(0, 1));
  asp.Send(0, Sparse(0, 2, proto::CSC, {0}, {4, 5}, true, 2))
      .Send(0, Pull(0, 2, proto::FP16_DELTA));
  Message predicted = Pull(1, 3);
  predicted.header.mutable_pull()->set_predict_fraction(0.5f);
  predicted.header.mutable_pull()->set_predict_updates(1);
  asp.Send(1, std::move(predicted)).Byte(7);
  s["asp"] = asp.bytes();
  // bsp: a pull parked until the clock completes, a departed worker, a snapshot.
  Ops bsp = InitAll(1 | kTwoWorkers);
  bsp.Send(0, Pull(0, 0, proto::FP32, 1)).Send(0, Push(0, 0, {1, 1, 1}));
  bsp.Byte(5).U16(250).Send(1, Push(1, 0, {3, 3, 3})).Send(0, Push(0, 1, {1, 1, 1}));
  bsp.Byte(6).Byte(2).Byte(7);
  s["bsp"] = bsp.bytes();
  // ssp: a pull waiting for the other worker's clock.
  Ops ssp = InitAll(2 | kTwoWorkers);
  ssp.Send(0, Push(0, 3, {1, 1})).Send(0, Pull(0, 3, proto::FP32, 0, 1));
  ssp.Send(1, Push(1, 3, {2, 2})).Byte(7);
  s["ssp"] = ssp.bytes();
  // r2sp: a worker joins (MEMBERSHIP), pushes, then the scheduler shuts the server down.
  Ops r2sp = InitAll(3 | kMomentum);
  Message membership = From(proto::SCHEDULER, 0, proto::MEMBERSHIP);
  membership.header.mutable_membership()->set_num_workers(2);
  membership.header.mutable_membership()->add_worker_ids("w0");
  membership.header.mutable_membership()->add_worker_ids("w1");
  r2sp.Send(kScheduler, std::move(membership)).Send(1, Push(1, 1, {1, 0, 1}));
  r2sp.Send(kScheduler, From(proto::SCHEDULER, 0, proto::SHUTDOWN));
  s["r2sp_join"] = r2sp.bytes();
  // easgd (bit 4 on bsp): a pull of the next round parked until both differences of the round
  // are in, a sparse difference refused, a snapshot.
  constexpr uint8_t kElastic = 16;
  Ops easgd = InitAll(1 | kElastic | kTwoWorkers);
  easgd.Send(0, Pull(0, 0, proto::FP32, 1)).Send(0, Push(0, 0, {1, 1, 1}));
  easgd.Send(1, Push(1, 0, {3, 3, 3})).Send(1, Sparse(1, 1, proto::TOPK, {0}, {1}, false));
  easgd.Byte(7);
  s["easgd"] = easgd.bytes();
  // eawild (bit 4 on asp): differences added on arrival, fp32 and fp16, and a pull.
  Ops eawild = InitAll(0 | kElastic | kTwoWorkers);
  eawild.Send(0, Push(0, 2, {1, 2, 3}, false, 0, 0.5f)).Send(1, Pull(1, 2, proto::FP16));
  Message half = Push(1, 2, {});
  half.header.set_codec(proto::FP16);
  half.payload[0] = HalfFrame({0.5f, -0.5f, 2});
  eawild.Send(1, std::move(half)).Send(0, Pull(0, 2)).Byte(7);
  s["eawild"] = eawild.bytes();
}

Message Register(proto::Role role, const std::string& id, int model_elements = 10) {
  Message m;
  m.header.set_type(proto::REGISTER);
  proto::RegisterRequest* reg = m.header.mutable_register_request();
  reg->set_role(role);
  reg->set_endpoint("tcp://127.0.0.1:1/" + id);
  reg->set_instance_id(id);
  if (role == proto::WORKER) {
    proto::TensorSpec* t = reg->add_model();
    t->set_name("w");
    t->set_num_elements(model_elements);
  }
  return m;
}

Message Barrier(proto::Role role, int rank, proto::Group group, uint64_t id) {
  Message m = From(role, rank, proto::BARRIER);
  m.header.mutable_barrier()->set_group(group);
  m.header.mutable_barrier()->set_barrier_id(id);
  return m;
}

Message Report(proto::MsgType type, int rank, int samples, bool leaving = false) {
  Message m = From(proto::WORKER, rank, type);
  m.header.mutable_report()->set_samples(samples);
  m.header.mutable_report()->set_compute_seconds(0.05);
  m.header.mutable_report()->set_comm_seconds(0.01);
  m.header.mutable_report()->set_leaving(leaving);
  return m;
}

// Worker `rank`'s EPOCH_PLAN request for `epoch`.
Message EpochPlan(int rank, int epoch, bool starting) {
  Message m = From(proto::WORKER, rank, proto::EPOCH_PLAN);
  m.header.mutable_epoch_plan_request()->set_epoch(epoch);
  m.header.mutable_epoch_plan_request()->set_starting(starting);
  return m;
}

void AddSchedulerSeeds(Seeds* seeds) {
  auto& s = (*seeds)["scheduler_core"];
  // Peers: s0, s1, w0, w1, w2, w3. Config: servers - 1 (bit 0), workers - 1 (bits 1-2),
  // mode (bits 3-4: asp, bsp, ssp, r2sp), hetero batching (bit 5), first-come slots (bit 6;
  // outside r2sp: epoch plans).
  constexpr int kS0 = 0, kW0 = 2, kW1 = 3, kW2 = 4;
  // bsp, one server and two workers: barriers, heartbeats, both finish, SHUTDOWN answered.
  Ops bsp((1 << 3) | (1 << 1));
  bsp.Send(kS0, Register(proto::SERVER, "s0")).Send(kW0, Register(proto::WORKER, "w0"));
  bsp.Send(kW1, Register(proto::WORKER, "w1"));
  bsp.Send(kS0, Barrier(proto::SERVER, 0, proto::ALL, 0));
  bsp.Send(kW0, Barrier(proto::WORKER, 0, proto::ALL, 0));
  bsp.Send(kW1, Barrier(proto::WORKER, 1, proto::ALL, 0));
  Message beat = From(proto::WORKER, 0, proto::HEARTBEAT);
  beat.header.mutable_heartbeat()->set_progress(5);
  bsp.Send(kW0, std::move(beat)).Send(kS0, From(proto::SERVER, 0, proto::HEARTBEAT));
  bsp.Byte(6).U16(500);
  bsp.Send(kW0, From(proto::WORKER, 0, proto::FINISH));
  bsp.Send(kW1, From(proto::WORKER, 1, proto::FINISH)).Byte(7).Byte(0).Byte(0);
  s["bsp"] = bsp.bytes();
  // r2sp with hetero batching: slots asked, granted, released; reports.
  Ops r2sp((3 << 3) | (1 << 1) | (1 << 5));
  r2sp.Send(kS0, Register(proto::SERVER, "s0")).Send(kW0, Register(proto::WORKER, "w0"));
  r2sp.Send(kW1, Register(proto::WORKER, "w1"));
  r2sp.Send(kW0, Report(proto::SLOT, 0, 32)).Send(kW1, Report(proto::SLOT, 1, 32));
  r2sp.Send(kW0, Report(proto::RELEASE, 0, 32)).Byte(6).U16(100);
  r2sp.Send(kW1, Report(proto::RELEASE, 1, 32)).Send(kW0, Report(proto::REPORT, 0, 32));
  r2sp.Send(kW1, Report(proto::RELEASE, 1, 32, /*leaving=*/true));
  s["r2sp_hetero"] = r2sp.bytes();
  // asp: a third worker joins the running job (MEMBERSHIP answered), one falls silent.
  Ops join(1 << 1);
  join.Send(kS0, Register(proto::SERVER, "s0")).Send(kW0, Register(proto::WORKER, "w0"));
  join.Send(kW1, Register(proto::WORKER, "w1")).Send(kW2, Register(proto::WORKER, "w2"));
  join.Byte(7).Byte(0).Byte(0).Byte(6).U16(500);  // 2 s
  join.Send(kS0, From(proto::SERVER, 0, proto::HEARTBEAT));
  join.Send(kW0, From(proto::WORKER, 0, proto::HEARTBEAT));
  join.Send(kW1, From(proto::WORKER, 1, proto::HEARTBEAT)).Byte(6).U16(500);
  join.Send(kW2, From(proto::WORKER, 2, proto::HEARTBEAT));  // declared dead by now
  s["asp_join"] = join.bytes();
  // asp with epoch plans (bit 6 outside r2sp): epoch 0 planned, worker 1 falls silent, epoch 1
  // deals its shard out; an epoch past the next is refused.
  Ops plans((1 << 1) | (1 << 6));
  plans.Send(kS0, Register(proto::SERVER, "s0")).Send(kW0, Register(proto::WORKER, "w0"));
  plans.Send(kW1, Register(proto::WORKER, "w1"));
  plans.Send(kW0, EpochPlan(0, 0, true)).Send(kW1, EpochPlan(1, 0, true));
  plans.Send(kS0, From(proto::SERVER, 0, proto::HEARTBEAT)).Byte(6).U16(1000);  // 4 s
  plans.Send(kS0, From(proto::SERVER, 0, proto::HEARTBEAT));
  plans.Send(kW0, From(proto::WORKER, 0, proto::HEARTBEAT)).Byte(6).U16(10);
  plans.Send(kW0, EpochPlan(0, 1, false)).Send(kW0, EpochPlan(0, 7, false));
  s["asp_epoch_plans"] = plans.bytes();
  // asp, two workers: worker 1 leaves (SIGTERM) and is dead at once; a LEAVE without a reason
  // and one from a server are refused; worker 0 finishes.
  Ops leave(1 << 1);
  leave.Send(kS0, Register(proto::SERVER, "s0")).Send(kW0, Register(proto::WORKER, "w0"));
  leave.Send(kW1, Register(proto::WORKER, "w1"));
  Message left = From(proto::WORKER, 1, proto::LEAVE);
  left.header.mutable_leave()->set_reason("signal 15");
  left.header.mutable_leave()->mutable_counters()->set_iterations(12);
  leave.Send(kW1, std::move(left));
  Message no_reason = From(proto::WORKER, 0, proto::LEAVE);
  no_reason.header.mutable_leave();
  leave.Send(kW0, std::move(no_reason)).Send(kS0, From(proto::SERVER, 0, proto::LEAVE));
  leave.Send(kW0, From(proto::WORKER, 0, proto::FINISH));
  s["asp_leave"] = leave.bytes();
}

void AddHeaderSeeds(Seeds* seeds) {
  auto& s = (*seeds)["message_header"];
  s["push"] = Frames(Push(1, 2, {1, 2, 3}, false, 7, 0.25f));
  s["sparse_push"] = Frames(Sparse(0, 1, proto::CSC, {0, 2}, {1, 2, 3, 4}, true, 2));
  s["register"] = Frames(Register(proto::WORKER, "w0"));
  Message reply = Pull(0, 3);
  reply.header.set_is_reply(true);
  reply.header.set_code(proto::NOT_READY);
  reply.header.set_error("server is not configured yet");
  s["error_reply"] = Frames(std::move(reply));
  Message beat;
  beat.header.set_type(proto::HEARTBEAT);
  beat.header.set_is_reply(true);
  beat.header.mutable_heartbeat_reply()->add_dead_workers(2);
  beat.header.mutable_heartbeat_reply()->set_job_failed("server 1 died");
  s["heartbeat_reply"] = Frames(std::move(beat)) + Frames(Pull(1, 0, proto::FP16));
}

}  // namespace

void AddNodeSeeds(Seeds* seeds) {
  AddServerSeeds(seeds);
  AddSchedulerSeeds(seeds);
  AddHeaderSeeds(seeds);
}

}  // namespace r2sp::fuzz
