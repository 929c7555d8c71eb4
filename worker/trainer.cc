// See trainer.h.
#include "worker/trainer.h"

#include <utility>

#include "common/status_macros.h"

namespace r2sp {

absl::Status JoinWith(WorkerSession* session, Trainer* trainer) {
  R2SP_ASSIGN_OR_RETURN(std::vector<proto::TensorSpec> tensors, trainer->Load());
  R2SP_RETURN_IF_ERROR(session->Join(std::move(tensors), trainer->wants_data_shard()));
  return session->Failed(session->InitialiseParameters(
      trainer->params(), [trainer](float*) { return trainer->InitialParameters(); }));
}

absl::Status RunWorker(WorkerSession* session, LoopTrainer* trainer) {
  R2SP_RETURN_IF_ERROR(JoinWith(session, trainer));
  absl::StatusOr<LoopResult> result = WithContext(trainer->Train(session), "training");
  return session->Failed(result.ok() ? session->End(*result, trainer->params())
                                     : result.status());
}

}  // namespace r2sp
