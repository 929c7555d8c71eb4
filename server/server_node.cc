// See server_node.h.
#include "server/server_node.h"

#include <utility>
#include <vector>

#include "common/cli.h"
#include "common/model_layout.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {

ServerNode::ServerNode(ServerNodeOptions options) : options_(std::move(options)) {}

ServerNode::~ServerNode() {
  if (scheduler_ != nullptr) scheduler_->StopHeartbeats();
  if (transport_ != nullptr) transport_->Stop();
}

absl::Status ServerNode::Run() {
  R2SP_RETURN_IF_ERROR(Join());
  Serve();
  return absl::OkStatus();
}

proto::NodeCounters ServerNode::counters() const {
  return handler_ != nullptr ? handler_->counters() : proto::NodeCounters();
}

absl::Status ServerNode::Join() {
  // The consistency mode comes from the scheduler's address book; the handler is built after
  // registration, so until then the transport answers requests with NOT_READY.
  R2SP_ASSIGN_OR_RETURN(NodeConnection node, ConnectNode(options_.connection));
  transport_ = std::move(node.transport);
  scheduler_ = std::move(node.scheduler);
  R2SP_ASSIGN_OR_RETURN(const proto::RegisterReply reg,
                        scheduler_->Register(proto::SERVER, {}));
  rank_ = reg.rank();
  const proto::AddressBook& book = reg.book();
  const std::vector<proto::TensorSpec> model(book.model().begin(), book.model().end());
  R2SP_ASSIGN_OR_RETURN(
      const ModelLayout layout,
      ModelLayout::Create(model, book.partition_bytes(), book.servers_size()));
  ServerOptions server = options_.server;
  server.sync = book.sync();
  handler_ = std::make_unique<ServerHandler>(server);
  handler_->Configure(rank_, book.workers_size(), layout);
  transport_->SetHandler(handler_.get());
  // Dead and finished workers: BSP clocks and SSP bounds stop waiting for them.
  scheduler_->StartHeartbeats([handler = handler_.get()](const proto::HeartbeatReply& beat) {
    std::vector<int> departed(beat.dead_workers().begin(), beat.dead_workers().end());
    departed.insert(departed.end(), beat.finished_workers().begin(),
                    beat.finished_workers().end());
    if (!departed.empty()) handler->SetDepartedWorkers(departed);
  });
  LOG(INFO) << "server " << rank_ << " serving at " << transport_->endpoint() << " ("
            << SyncModeName(server.sync) << ")";
  return scheduler_->Barrier(proto::ALL);
}

void ServerNode::Serve() {
  handler_->shutdown_requested().WaitForNotification();
  scheduler_->StopHeartbeats();
  transport_->Stop();
  const proto::NodeCounters c = handler_->counters();
  LOG(INFO) << "server " << rank_ << " stopping: " << c.pushes() << " pushes ("
            << c.bytes_pushed() << " bytes), " << c.pulls() << " pulls (" << c.bytes_pulled()
            << " bytes), " << c.dropped_messages() << " rejected";
}

}  // namespace r2sp
