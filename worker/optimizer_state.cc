// See optimizer_state.h.
#include "worker/optimizer_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/checkpoint.pb.h"

namespace r2sp {
namespace {

Message StateRequest(const Partition& p, int rank) {
  Message m;
  m.header.set_type(proto::OPTIMIZER_STATE);
  m.header.set_sender_role(proto::WORKER);
  m.header.set_sender_rank(rank);
  m.header.set_key(p.key);
  m.header.set_to_server(p.server);
  return m;
}

absl::StatusOr<Message> Call(Requester& requester, const PsClient& ps, const Partition& p,
                             Message request, absl::Duration timeout) {
  R2SP_ASSIGN_OR_RETURN(Message reply, CallAndWait(requester, ps.ServerEndpoint(p.server),
                                                   std::move(request), timeout));
  R2SP_RETURN_IF_ERROR(FromReplyHeader(reply.header));
  return reply;
}

// Copies a moment's bytes into its slice of `flat` (sized for the model on first use).
absl::Status TakeMoment(const std::string& bytes, const Partition& p, size_t total,
                        std::vector<float>& flat) {
  if (bytes.empty()) return absl::OkStatus();
  if (bytes.size() != p.bytes()) {
    return absl::InternalError(absl::StrCat("partition ", p.key, "'s state holds ",
                                            bytes.size(), " bytes of a moment, not ", p.bytes()));
  }
  flat.resize(total, 0.0f);
  std::memcpy(flat.data() + p.offset, bytes.data(), bytes.size());
  return absl::OkStatus();
}

std::string Slice(const std::vector<float>& flat, const Partition& p) {
  if (flat.empty()) return "";
  return std::string(reinterpret_cast<const char*>(flat.data() + p.offset), p.bytes());
}

}  // namespace

absl::StatusOr<ScriptOptimizerState> PullOptimizerState(Requester& requester,
                                                        const PsClient& ps, int rank,
                                                        absl::Duration timeout) {
  const ModelLayout& layout = ps.layout();
  ScriptOptimizerState state;
  bool first = true;
  for (const Partition& p : layout.partitions()) {
    R2SP_ASSIGN_OR_RETURN(Message reply, Call(requester, ps, p, StateRequest(p, rank), timeout));
    proto::PartitionCheckpoint held;
    if (reply.payload.size() != 1 ||
        !held.ParseFromArray(reply.payload[0].data(), reply.payload[0].size())) {
      return absl::InternalError(
          absl::StrCat("server ", p.server, " answered partition ", p.key, "'s state with "
                       "something other than one PartitionCheckpoint"));
    }
    R2SP_RETURN_IF_ERROR(TakeMoment(held.momentum(), p, layout.total_elements(), state.first));
    R2SP_RETURN_IF_ERROR(
        TakeMoment(held.second_moment(), p, layout.total_elements(), state.second));
    state.updates = first ? held.updates() : std::min(state.updates, held.updates());
    state.steps = first ? held.steps() : std::min(state.steps, held.steps());
    first = false;
  }
  return state;
}

absl::Status PushInitialState(Requester& requester, const PsClient& ps, int rank,
                              const float* params, const ScriptOptimizerState& state,
                              absl::Duration timeout) {
  const ModelLayout& layout = ps.layout();
  const size_t total = layout.total_elements();
  const auto fits = [total](const std::vector<float>& m) {
    return m.empty() || m.size() == total;
  };
  if (!fits(state.first) || !fits(state.second)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an optimizer state's moments hold ", state.first.size(), " and ", state.second.size(),
        " values; the model has ", total));
  }
  if (!(state.steps >= 0 && state.steps < 1e15) || state.updates < 0 ||
      static_cast<double>(state.updates) > state.steps + 1e-6) {
    return absl::InvalidArgumentError(
        absl::StrCat("an optimizer state's counters are out of range: ", state.updates,
                     " updates in ", state.steps, " steps"));
  }
  const int64_t clock = static_cast<int64_t>(std::floor(state.steps + 1e-6));
  for (const Partition& p : layout.partitions()) {
    proto::PartitionCheckpoint initial;
    initial.set_key(p.key);
    initial.set_version(clock);
    initial.set_updates(state.updates);
    initial.set_steps(state.steps);
    initial.set_clock(clock);
    initial.set_weights(
        std::string(reinterpret_cast<const char*>(params + p.offset), p.bytes()));
    initial.set_momentum(Slice(state.first, p));
    initial.set_second_moment(Slice(state.second, p));
    Message request = StateRequest(p, rank);
    const std::string bytes = initial.SerializeAsString();
    request.payload.emplace_back(bytes.data(), bytes.size());
    R2SP_RETURN_IF_ERROR(Call(requester, ps, p, std::move(request), timeout).status());
  }
  return absl::OkStatus();
}

}  // namespace r2sp
