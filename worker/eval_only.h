// Model files outside training. worker --eval_only --init=checkpoint:PATH: evaluates a model
// file (models/model_file.h) on
// its data set's test split with no job running. On the same data and backend this reproduces
// the accuracy training reported for the file; PATH may be a directory of model files, whose
// newest good one is used (a corrupt newest falls back to the one before, with a warning).
#ifndef R2SP_WORKER_EVAL_ONLY_H_
#define R2SP_WORKER_EVAL_ONLY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/backend.h"
#include "models/graph.h"

namespace r2sp {

struct EvalOnlyOptions {
  std::string model_path;  // a model file or a directory of them
  std::string data = "fashion-mnist";
  std::string data_dir;    // empty: the data set's default
  models::BackendOptions backend;
  int eval_batch = 1000;
};

struct EvalOnlyResult {
  std::string path;                  // the model file evaluated
  std::vector<std::string> skipped;  // newer files that did not verify, with why
  std::string model;
  int64_t step = 0;
  double accuracy = 0, loss = 0;     // now
  double reported_accuracy = -1;     // what training reported for the file (-1: none)
};

// Errors name the file: unreadable, corrupt, or not fitting the data set (its shape or classes)
// or the model its name builds.
absl::StatusOr<EvalOnlyResult> EvaluateModelFile(const EvalOnlyOptions& options);

// --init=checkpoint:PATH: the model file (or the newest good one in the directory) at `path`
// into `params` (`n` floats), which must fit `graph`; worker 0 starts the job from it.
absl::Status LoadInitialModel(const std::string& path, const models::Graph& graph, float* params,
                              size_t n);

}  // namespace r2sp

#endif  // R2SP_WORKER_EVAL_ONLY_H_
