// What the scheduler answers a REGISTER with: the address book (the job's settings, its nodes
// and its model) and the register reply, at the rendezvous or to a node joining the running
// job. Pure: builds messages from what it is given.
#ifndef R2SP_SCHEDULER_REGISTER_REPLIES_H_
#define R2SP_SCHEDULER_REGISTER_REPLIES_H_

#include <string>
#include <vector>

#include "common/book_frame.h"
#include "common/handler.h"
#include "scheduler/barrier_book.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/node_table.h"

namespace r2sp {

// The address book: `settings` (the job-wide fields, global_batch included with hetero
// batching), the nodes, the model and, with a batch tuner, the batch to start with.
// `for_servers` adds the workers' routing ids (servers take PUSH and PULL only from those
// connections).
proto::AddressBook MakeAddressBook(const proto::AddressBook& settings, const NodeTable& nodes,
                                   const std::vector<proto::TensorSpec>& model,
                                   const BatchTuner* tuner, bool for_servers);

// The REGISTER reply at the rendezvous: the rank, a worker's data shard (its rank), the book
// (lent as the payload frame: one encoding for every node of the rendezvous).
Message RendezvousReply(proto::Role role, int rank, int data_world, const BookFrame& book,
                        const std::string& scheduler_id);

// The REGISTER reply of a node that joins the running job (a worker, or a server replacing a
// lost one): its rank and data shard, the book, and where the groups' barriers stand.
Message JoinedReply(const Node& node, int data_world, const BookFrame& book,
                    const std::string& scheduler_id, const BarrierBook& barriers);

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_REGISTER_REPLIES_H_
