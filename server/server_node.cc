// See server_node.h.
#include "server/server_node.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cli.h"
#include "common/sync_modes.h"
#include "common/option_checker.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/apply_threads.h"

namespace r2sp {

ServerNode::ServerNode(ServerNodeOptions options) : options_(std::move(options)) {}

ServerNode::~ServerNode() {
  if (checkpointer_ != nullptr) checkpointer_->Stop();
  if (scheduler_ != nullptr) scheduler_->StopHeartbeats();
  if (transport_ != nullptr) transport_->Stop();
}

absl::Status ServerNodeOptions::Validate() const {
  OptionChecker c("ServerNodeOptions");
  c.Merge(connection.Validate());
  c.Merge(server.Validate());
  c.Check(checkpoint.keep >= 1, "--checkpoint_keep", "checkpoint.keep", ">= 1",
          checkpoint.keep);
  c.Check(checkpoint.every_time >= absl::ZeroDuration(), "--checkpoint_every",
          "checkpoint.every_time", ">= 0", checkpoint.every_time);
  c.Check(checkpoint.every_steps >= 0, "--checkpoint_every", "checkpoint.every_steps", ">= 0",
          checkpoint.every_steps);
  c.Require(!resume || !checkpoint.dir.empty(), "--resume", "resume", "needs --checkpoint_dir");
  return c.status();
}

absl::Status ServerNode::Run() {
  R2SP_RETURN_IF_ERROR(options_.Validate());
  R2SP_RETURN_IF_ERROR(Join());
  return Serve();
}

proto::NodeCounters ServerNode::counters() const {
  return handler_ != nullptr ? handler_->counters() : proto::NodeCounters();
}

bool ServerNode::Stop(const std::string& why, int exit_status) {
  absl::MutexLock lock(&stop_mu_);
  if (!stop_reason_.empty()) return serving_;
  stop_reason_ = why;
  exit_status_ = exit_status;
  if (!serving_) return false;
  stop_.Notify();
  return true;
}

int ServerNode::exit_status() const {
  absl::MutexLock lock(&stop_mu_);
  return exit_status_;
}

int ServerNode::ApplyThreadsFor(const ModelLayout& layout) const {
  if (options_.server.apply_threads != kAutoApplyThreads) return options_.server.apply_threads;
  size_t largest = 0;
  for (const Partition& p : layout.partitions()) {
    if (p.server == rank_) largest = std::max(largest, p.num_elements);
  }
  const int cores = UsableCores();
  const int io_threads = IoThreadsOf(options_.connection);
  const int threads = AutoApplyThreads(largest, cores, io_threads);
  LOG(INFO) << "server " << rank_ << ": --apply_threads=auto: " << threads << " (largest "
            << "partition " << largest << " elements, " << cores << " cores, " << io_threads
            << " I/O threads)";
  return threads;
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
  server.apply_threads = ApplyThreadsFor(layout);
  server.sync = book.sync();
  if (book.elastic_period() > 0) server.elastic_period = book.elastic_period();
  handler_ = std::make_unique<ServerHandler>(server);
  ServerPeers peers;
  peers.scheduler_id = reg.scheduler_id();
  for (const proto::NodeInfo& w : book.workers()) peers.worker_ids.push_back(w.routing_id());
  handler_->Configure(rank_, peers, layout);
  const bool replacing = reg.joined_running_job();
  if (replacing) {
    LOG(INFO) << "server " << rank_ << ": replacing the lost server of this rank; restoring "
              << "its shard from the newest checkpoint";
  }
  // Heartbeats from registration on: restoring a large shard can take longer than the
  // scheduler's heartbeat timeout, which would declare this server dead while it restores.
  // Dead and finished workers: BSP clocks and SSP bounds stop waiting for them.
  scheduler_->StartHeartbeats(
      [handler = handler_.get()](const proto::HeartbeatReply& beat) {
        std::vector<int> departed(beat.dead_workers().begin(), beat.dead_workers().end());
        departed.insert(departed.end(), beat.finished_workers().begin(),
                        beat.finished_workers().end());
        if (!departed.empty()) handler->SetDepartedWorkers(departed);
      },
      [this](const std::string& why) { Stop(why, 3); });
  R2SP_RETURN_IF_ERROR(PrepareCheckpoints(book, layout, options_.resume || replacing));
  transport_->SetHandler(handler_.get());
  {
    absl::MutexLock lock(&stop_mu_);
    serving_ = true;  // until now Stop() leaves stopping to its caller
    if (!stop_reason_.empty()) stop_.Notify();  // a Stop() whose caller did not exit
  }
  LOG(INFO) << "server " << rank_ << " serving at " << transport_->endpoint() << " ("
            << SyncModeName(server.sync) << ")";
  if (checkpointer_ != nullptr) checkpointer_->Start();
  if (replacing) return absl::OkStatus();  // the job is past its barriers
  return scheduler_->Barrier(proto::ALL);
}

absl::Status ServerNode::PrepareCheckpoints(const proto::AddressBook& book,
                                            const ModelLayout& layout, bool restore) {
  if (options_.checkpoint.dir.empty()) {
    if (options_.resume) return absl::InvalidArgumentError("--resume needs --checkpoint_dir");
    if (restore) {
      return absl::FailedPreconditionError(
          "a server replacing a lost one restores its shard from the checkpoints: it needs "
          "--checkpoint_dir");
    }
    return absl::OkStatus();
  }
  CheckpointIdentity identity;
  identity.job_id = book.job_id();
  identity.layout_hash = layout.Hash();
  identity.server_rank = rank_;
  identity.num_servers = book.servers_size();
  identity.sync = SyncModeName(book.sync());
  checkpointer_ = std::make_unique<Checkpointer>(options_.checkpoint, handler_.get(), identity);
  if (!restore) return absl::OkStatus();
  if (layout.KeysOf(rank_).empty()) {
    LOG(INFO) << "server " << rank_ << " holds no partitions: nothing to resume";
    return absl::OkStatus();
  }
  R2SP_ASSIGN_OR_RETURN(
      const LoadedCheckpoint loaded,
      WithContext(checkpointer_->store().LoadLatest(identity),
                  options_.resume ? "cannot resume" : "cannot replace the lost server"));
  R2SP_RETURN_IF_ERROR_WITH(handler_->Restore(loaded.shard),
                            absl::StrCat("cannot restore ", loaded.path));
  LOG(INFO) << "server " << rank_ << " resumed from " << loaded.path << " at step "
            << loaded.manifest.step()
            << (loaded.skipped.empty()
                    ? std::string()
                    : absl::StrCat("; passed over newer ones: ",
                                   absl::StrJoin(loaded.skipped, "; ")));
  return absl::OkStatus();
}

absl::Status ServerNode::Serve() {
  while (!handler_->shutdown_requested().WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
    if (stop_.HasBeenNotified()) break;
  }
  scheduler_->StopHeartbeats();
  transport_->Stop();
  const proto::NodeCounters c = handler_->counters();
  LOG(INFO) << "server " << rank_ << " stopping: " << c.pushes() << " pushes ("
            << c.bytes_pushed() << " bytes), " << c.pulls() << " pulls (" << c.bytes_pulled()
            << " bytes), " << c.dropped_messages() << " rejected";
  std::string reason;
  {
    absl::MutexLock lock(&stop_mu_);
    reason = stop_reason_;
  }
  if (checkpointer_ != nullptr) {
    checkpointer_->Stop();
    absl::StatusOr<std::string> written = checkpointer_->CheckpointNow(
        reason.empty() ? "final" : reason);
    if (!written.ok()) {
      LOG(ERROR) << "the last checkpoint failed: " << written.status();
      if (reason.empty()) return written.status();
    } else if (!reason.empty()) {
      reason = absl::StrCat(reason, "; checkpoint written to ", *written);
    }
  }
  if (!reason.empty()) return absl::AbortedError(absl::StrCat("server ", rank_, ": ", reason));
  return absl::OkStatus();
}

}  // namespace r2sp
