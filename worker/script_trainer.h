// The trainer of a model that a script computes (the Python client, worker/python/): the
// script's thread drives every step itself, calling straight into the job's TrainingRun
// (training_run.h), the same run the C++ trainers' loop drives:
//   Join (register the script's tensors; rank 0's parameters start the job) -> Begin (the
//   training set's size: the epochs, batch sizes and epoch plans follow) -> per step: NextStep
//   (which step, its batch and the epoch's live data shards), GradientReady while backward runs
//   (--overlap pushes start there), ParamsNeeded before forward reads parameters an overlapped
//   pull may still write, Submit (the exchange: the pulled parameters are in params() when it
//   returns) -> a due evaluation's report -> Finish (the final barrier and pull, FINISH).
// No thread of its own: the C++ threads under it are the transport's I/O, the heartbeats and
// the pushes' background work.
#ifndef R2SP_WORKER_SCRIPT_TRAINER_H_
#define R2SP_WORKER_SCRIPT_TRAINER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/exchanger.h"
#include "worker/run_log.h"
#include "worker/trainer.h"
#include "worker/training_run.h"
#include "worker/worker_session.h"

namespace r2sp {

// What the job decided for this worker, once it joined.
struct JoinedJob {
  int rank = 0;
  int workers = 0;
  std::string mode;  // bsp, ssp, asp, r2sp, easgd or eawild
  bool hetero_batching = false;
  int data_world = 0;  // the data set's shards
  int data_shard = 0;  // this worker's
  int64_t first_step = 0;  // > 0: the job resumed, or this worker joined a running one
  int batch_size = 0;      // until the scheduler says otherwise
  bool overlaps_backward = false;  // GradientReady starts pushes during backward
  // The exchange may leave a step's pull running into the next step (--overlap with
  // --overlap_pulls, the slot not covering the pull: Exchanger::overlaps_pulls()); it does
  // when the script enabled forward waits.
  bool overlaps_pulls = false;
  int elastic_period = 0;  // easgd, eawild; 0 in other modes
};

// A step for the script: the run's, with the data shards its epoch trains.
struct ScriptStep : RunStep {
  std::vector<int> live_shards;
};

// Thread-compatible: the script's thread calls it; GradientReady and ParamsNeeded may come from
// another thread of the script's (autograd's) while that one waits; the step's calls are
// serialised. The session and `params` (the model's size) are borrowed.
class ScriptTrainer : public Trainer {
 public:
  ScriptTrainer(WorkerSession* session, std::vector<proto::TensorSpec> tensors, float* params);
  ~ScriptTrainer() override;

  absl::StatusOr<std::vector<proto::TensorSpec>> Load() override { return tensors_; }
  bool wants_data_shard() const override { return true; }
  float* params() override { return params_; }

  // Joins the job (JoinWith): on return params() holds the job's initial parameters.
  // FailedPrecondition if called twice.
  absl::Status Join();
  // REQUIRES: joined.
  const JoinedJob& job() const { return job_; }
  // Whether this worker evaluates now (evaluator_role.h: the lowest live rank).
  bool evaluates() const { return joined_ && session_->evaluator()->Evaluates(); }
  // The script's forward will call ParamsNeeded before it reads each part of params(), so a
  // step's pull may run on into the next step. Before Begin (FailedPrecondition after).
  absl::Status EnableForwardWaits();
  // Whether pulls run on into the next step: forward waits enabled and the job's exchanger
  // overlaps pulls.
  bool overlaps_pulls() const { return forward_waits_ && job_.overlaps_pulls; }
  // Training starts on a training set of `train_samples`. FailedPrecondition before joining or
  // a second time; InvalidArgument for a size < 1.
  absl::Status Begin(int64_t train_samples);

  // The next step, or nullopt once training is over (an evaluation due and not reported is
  // passed over). FailedPrecondition before Begin, or while a step is out.
  absl::StatusOr<std::optional<ScriptStep>> NextStep() ABSL_LOCKS_EXCLUDED(mu_);
  // Backward finished [offset, offset + count) of `grads` (the model's size). FailedPrecondition
  // without a step out; OutOfRange outside the model.
  absl::Status GradientReady(HostGradient grads, int64_t offset, int64_t count)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forward is about to read [offset, offset + count) of params(): waits for the pull left
  // running to have written it (nothing to wait for outside a step or without overlapped
  // pulls). OutOfRange outside the model.
  absl::Status ParamsNeeded(int64_t offset, int64_t count) ABSL_LOCKS_EXCLUDED(mu_);
  // The step's gradient is complete: its exchange. FailedPrecondition without a step out (or
  // once training is over); InvalidArgument for samples < 0.
  absl::Status Submit(const ComputedStep& step) ABSL_LOCKS_EXCLUDED(mu_);
  // An evaluation is due on this worker (after an epoch, or the run's final one).
  bool EvaluationDue() const;
  // Reports the due evaluation; false (nothing recorded) when none is due.
  bool ReportEvaluation(const TestEvaluation& evaluation);
  // easgd, eawild: the centre into `out` (the model's size) as of the last submitted step
  // (easgd: once the rounds this worker pushed are added); Cancelled once `interrupted` says so.
  // FailedPrecondition in other modes, before joining, and once training finished.
  absl::Status PullCentre(float* out, const std::function<bool()>& interrupted);
  // After the last step: the final barrier and pull (params() then hold the final parameters),
  // FINISH, and what the run did. FailedPrecondition when the run still wants steps.
  absl::StatusOr<LoopResult> Finish() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The run's step with the current epoch's live shards.
  ScriptStep StepOf(const RunStep& run) const;
  absl::Status CheckRange(const char* what, int64_t offset, int64_t count) const;
  // FailedPrecondition saying the run still wants `step`.
  static absl::Status NotOver(const ScriptStep& step);

  WorkerSession* const session_;
  const std::vector<proto::TensorSpec> tensors_;
  float* const params_;
  int64_t size_ = 0;
  bool joined_ = false;
  bool forward_waits_ = false;
  bool finished_ = false;
  JoinedJob job_;
  std::vector<int> all_shards_;
  std::map<int, std::vector<int>> plans_;  // epoch -> its live shards (epoch plans)
  std::vector<int> live_;                  // the current epoch's
  int64_t submitted_clock_ = -1;           // the last step submitted (its exchange done)
  std::unique_ptr<RunLog> log_;
  std::unique_ptr<Exchanger> exchanger_;
  absl::Mutex mu_;  // the step's calls, one at a time
  std::unique_ptr<TrainingRun> run_;
  std::optional<ScriptStep> out_;  // the step out
};

}  // namespace r2sp

#endif  // R2SP_WORKER_SCRIPT_TRAINER_H_
