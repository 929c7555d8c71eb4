// ServerHandler's OPTIMIZER_STATE requests (server_handler.h): a partition's optimizer state
// for a script's state_dict(), and a script's checkpoint installed as a partition's initial
// value and state (its worker 0 sends it in place of INIT), checked before anything changes.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "proto/checkpoint.pb.h"
#include "server/server_handler.h"
#include "server/shard_checkpoint.h"

namespace r2sp {

absl::Status ServerHandler::HandleOptimizerState(Message& request, Responder& responder) {
  R2SP_ASSIGN_OR_RETURN(HeldPartition* const found, FindPartition(request.header, responder));
  HeldPartition& held = *found;
  const uint64_t key = request.header.key();
  if (Elastic(options_.sync)) {
    return absl::InvalidArgumentError(
        "easgd and eawild keep no optimizer state on the servers (they add to the centre)");
  }
  if (request.payload.empty()) {  // the state, pulled
    if (!held.state.initialized()) {
      return absl::FailedPreconditionError(
          absl::StrCat("partition ", key, " has no initial value yet"));
    }
    const std::string state =
        SnapshotPartition(key, held, KeepsOwnMomentum(), /*weights=*/false)
            .SerializeAsString();
    Message reply;
    reply.payload.emplace_back(state.data(), state.size());
    responder.Reply(std::move(reply));
    return absl::OkStatus();
  }
  proto::PartitionCheckpoint initial;
  if (request.payload.size() != 1 ||
      !initial.ParseFromArray(request.payload[0].data(), request.payload[0].size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OPTIMIZER_STATE of partition ", key, " carries one serialized PartitionCheckpoint or "
        "nothing (", request.payload.size(), " frames that are not one)"));
  }
  if (initial.key() != key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OPTIMIZER_STATE of partition ", key, " holds partition ", initial.key(), "'s state"));
  }
  if (!held.state.initialized()) {  // else the first initial value won: acknowledged
    R2SP_RETURN_IF_ERROR(RestorePartition(initial, held));
    ReleaseParkedPulls(held);
  }
  responder.ReplyStatus(absl::OkStatus());
  return absl::OkStatus();
}

}  // namespace r2sp
