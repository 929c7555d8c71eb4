// See pull_reply.h.
#include "server/pull_reply.h"

#include <memory>
#include <utility>

#include "common/wire/fp16_frame.h"

namespace r2sp {

PullReplier::PullReplier(const SgdOptions& sgd, const LrSchedule& schedule, bool per_sample_updates)
    : sgd_(sgd), schedule_(schedule), per_sample_updates_(per_sample_updates) {}

Prediction PullReplier::PredictionFor(const HeldPartition& held, double steps, float fraction,
                                      int updates) const {
  // The updates to come carry the fraction between them (or are whole steps each).
  const float each = per_sample_updates_ ? fraction / static_cast<float>(updates) : 1.0f;
  const SgdOptions sgd = held.script_sgd ? *held.script_sgd : ScheduledSgd(sgd_, schedule_, steps);
  return r2sp::PredictionFor(sgd, each, updates);
}

Message PullReplier::Build(HeldPartition& held, const wire::PullRequest& pull, double waited,
                           int num_workers) const {
  wire::PullReplyFields fields;
  fields.version = held.state.version();
  fields.waited_seconds = waited;
  fields.steps = held.steps;
  fields.restored_steps = held.restored_steps;
  zmq::message_t frame;
  proto::Codec codec = proto::FP32;
  if (pull.predict_updates > 0 && (held.script_runs.empty() || held.script_sgd)) {
    frame = held.state.PredictedPullFrame(
        PredictionFor(held, held.steps, pull.predict_fraction, pull.predict_updates));
  } else if (pull.predict_updates > 0) {  // a script's Adam: as its moments say
    const float each = per_sample_updates_
                           ? pull.predict_fraction / static_cast<float>(pull.predict_updates)
                           : 1.0f;
    frame = held.state.PredictedScriptFrame(held.script_runs, held.steps, each,
                                            pull.predict_updates);
  } else if (pull.codec == proto::FP16) {
    frame = held.state.Fp16PullFrame();  // encoded once per version
    codec = proto::FP16;
  } else {
    frame = held.state.PullFrame();
  }
  if (pull.codec == proto::FP16_DELTA) {
    if (held.shadows == nullptr) {
      held.shadows = std::make_unique<PullShadows>(held.state.num_elements(), num_workers);
    }
    PullShadows::Reply delta = held.shadows->Answer(pull.rank, pull.delta_base, std::move(frame));
    frame = std::move(delta.frame);
    codec = delta.codec;
    fields.delta_seq = delta.seq;
  } else if (pull.codec == proto::FP16 && codec != proto::FP16) {
    // Predicted weights, for this pull alone.
    frame = wire::Fp16Frame(static_cast<const float*>(frame.data()), frame.size() / sizeof(float));
    codec = proto::FP16;
  }
  return wire::EncodePullReply(fields, codec, std::move(frame));
}

}  // namespace r2sp
