// See register_replies.h.
#include "scheduler/register_replies.h"

#include <utility>

namespace r2sp {

proto::AddressBook MakeAddressBook(const proto::AddressBook& settings, const NodeTable& nodes,
                                   const std::vector<proto::TensorSpec>& model,
                                   const BatchTuner* tuner, bool for_servers) {
  proto::AddressBook book;
  nodes.AddNodesTo(book, for_servers);
  for (const proto::TensorSpec& t : model) *book.add_model() = t;
  book.MergeFrom(settings);
  if (tuner != nullptr) {
    book.set_hetero_batching(true);
    book.set_initial_batch(tuner->batch(0));
  }
  return book;
}

Message RendezvousReply(proto::Role role, int rank, int data_world, const BookFrame& book,
                        const std::string& scheduler_id) {
  Message reply;
  proto::RegisterReply* r = reply.header.mutable_register_reply();
  r->set_rank(rank);
  r->set_data_shard(role == proto::WORKER ? rank : -1);
  r->set_data_world(data_world);
  r->set_scheduler_id(scheduler_id);
  AttachBook(book, reply);
  return reply;
}

Message JoinedReply(const Node& node, int data_world, const BookFrame& book,
                    const std::string& scheduler_id, const BarrierBook& barriers) {
  Message reply;
  proto::RegisterReply* r = reply.header.mutable_register_reply();
  r->set_rank(node.rank);
  r->set_scheduler_id(scheduler_id);
  r->set_joined_running_job(true);
  r->set_data_shard(node.data_shard);
  r->set_data_world(data_world);
  r->set_next_workers_barrier(barriers.current(proto::WORKERS));
  r->set_next_all_barrier(barriers.current(proto::ALL));
  AttachBook(book, reply);
  return reply;
}

}  // namespace r2sp
