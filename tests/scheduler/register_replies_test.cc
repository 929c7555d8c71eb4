// Tests of the scheduler's REGISTER replies: the address book's settings, nodes, model and
// initial batch, the rendezvous reply, and a joiner's reply with where the barriers stand.
#include "scheduler/register_replies.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1);

TEST(RegisterRepliesTest, TheBookCarriesSettingsNodesModelAndBatch) {
  NodeTable nodes;
  nodes.Add(proto::SERVER, "tcp://s0", "s0", "s0-route", kT0);
  nodes.Add(proto::WORKER, "tcp://w0", "w0", "w0-route", kT0);
  proto::AddressBook settings;
  settings.set_sync(proto::SSP);
  settings.set_staleness(2);
  settings.set_job_id("job");
  settings.set_global_batch(64);
  std::vector<proto::TensorSpec> model(1);
  model[0].set_name("w");
  model[0].set_num_elements(9);
  proto::AddressBook book = MakeAddressBook(settings, nodes, model, nullptr, false);
  EXPECT_EQ(book.sync(), proto::SSP);
  EXPECT_EQ(book.staleness(), 2);
  EXPECT_EQ(book.job_id(), "job");
  EXPECT_FALSE(book.hetero_batching());
  ASSERT_EQ(book.model_size(), 1);
  EXPECT_EQ(book.model(0).num_elements(), 9);
  ASSERT_EQ(book.workers_size(), 1);
  EXPECT_EQ(book.workers(0).routing_id(), "");
  EXPECT_EQ(book.servers(0).endpoint(), "tcp://s0");
  BatchTunerOptions batching;
  batching.global_batch = 64;
  BatchTuner tuner(batching, 2);
  book = MakeAddressBook(settings, nodes, model, &tuner, /*for_servers=*/true);
  EXPECT_TRUE(book.hetero_batching());
  EXPECT_EQ(book.initial_batch(), tuner.batch(0));
  EXPECT_EQ(book.initial_batch(), 32);
  EXPECT_EQ(book.workers(0).routing_id(), "w0-route");
}

TEST(RegisterRepliesTest, RendezvousRepliesGiveWorkersTheirRankAsShard) {
  proto::AddressBook book;
  book.set_job_id("j");
  const BookFrame frame(book);
  Message worker = RendezvousReply(proto::WORKER, 3, 4, frame, "sched");
  // The book travels as the payload frame, the bytes the frame was encoded to.
  ASSERT_EQ(worker.payload.size(), 1u);
  EXPECT_EQ(worker.payload[0].to_string(), book.SerializeAsString());
  EXPECT_TRUE(worker.header.register_reply().book_in_payload());
  EXPECT_FALSE(worker.header.register_reply().has_book());
  const proto::RegisterReply w = RegisterReplyOf(worker).value();
  EXPECT_EQ(w.rank(), 3);
  EXPECT_EQ(w.data_shard(), 3);
  EXPECT_EQ(w.data_world(), 4);
  EXPECT_EQ(w.book().job_id(), "j");
  EXPECT_EQ(w.scheduler_id(), "sched");
  EXPECT_FALSE(w.joined_running_job());
  Message server = RendezvousReply(proto::SERVER, 1, 4, frame, "sched");
  // The same bytes, lent, not copied.
  EXPECT_EQ(server.payload[0].data(), worker.payload[0].data());
  EXPECT_EQ(server.header.register_reply().data_shard(), -1);
  EXPECT_EQ(server.header.register_reply().rank(), 1);
}

TEST(RegisterRepliesTest, AJoinersReplySaysWhereTheBarriersStand) {
  testing::RecordingSink sink;
  BarrierBook barriers;
  proto::Header at_all;
  at_all.mutable_barrier()->set_group(proto::ALL);
  Responder r(&sink, "w0", at_all);
  ASSERT_TRUE(barriers.Arrive(at_all, NodeId{proto::WORKER, 0}, r).ok());
  barriers.Release({NodeId{proto::WORKER, 0}});  // ALL moves on to barrier 1
  NodeTable nodes;
  Node& joiner = nodes.Add(proto::WORKER, "tcp://j", "j", "j", kT0);
  joiner.data_shard = 5;
  proto::AddressBook book;
  book.set_job_id("joined");
  Message reply = JoinedReply(joiner, 2, BookFrame(book), "sched", barriers);
  const proto::RegisterReply j = RegisterReplyOf(reply).value();
  EXPECT_EQ(j.book().job_id(), "joined");
  EXPECT_TRUE(j.joined_running_job());
  EXPECT_EQ(j.rank(), 0);
  EXPECT_EQ(j.data_shard(), 5);
  EXPECT_EQ(j.data_world(), 2);
  EXPECT_EQ(j.next_all_barrier(), 1u);
  EXPECT_EQ(j.next_workers_barrier(), 0u);
  EXPECT_EQ(j.scheduler_id(), "sched");
}

}  // namespace
}  // namespace r2sp
