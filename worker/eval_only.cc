// See eval_only.h.
#include "worker/eval_only.h"

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/model_file.h"
#include "worker/model_workload.h"

namespace r2sp {

absl::StatusOr<EvalOnlyResult> EvaluateModelFile(const EvalOnlyOptions& options) {
  R2SP_ASSIGN_OR_RETURN(models::LoadedModel loaded, models::LoadModelFile(options.model_path));
  const proto::ModelFile& file = loaded.model;
  R2SP_ASSIGN_OR_RETURN(models::TrainTest data, LoadWorkerData(options.data, options.data_dir));
  const models::Shape shape = data.test.shape;
  if (shape.c != file.channels() || shape.h != file.height() || shape.w != file.width() ||
      data.test.num_classes != file.num_classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model file ", loaded.path, " is for ", file.channels(), "x", file.height(), "x",
        file.width(), " images in ", file.num_classes(), " classes; --data=", options.data,
        " has ", shape.c, "x", shape.h, "x", shape.w, " in ", data.test.num_classes));
  }
  R2SP_ASSIGN_OR_RETURN(models::Graph graph,
                        models::BuildModel(file.model(), shape, file.num_classes()));
  R2SP_RETURN_IF_ERROR(models::CheckModelFits(file, graph, loaded.path));
  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<models::Network> net,
                        models::CreateNetwork(graph, options.backend));
  std::vector<float> stats(file.batch_norm_statistics().size() / sizeof(float));
  std::memcpy(stats.data(), file.batch_norm_statistics().data(), stats.size() * sizeof(float));
  R2SP_RETURN_IF_ERROR(net->SetBatchNormStatistics(stats));
  std::vector<float> params(graph.num_parameters());
  std::memcpy(params.data(), file.parameters().data(), params.size() * sizeof(float));
  R2SP_ASSIGN_OR_RETURN(models::EvalResult r,
                        EvaluateDataset(net.get(), data.test, params.data(), options.eval_batch));
  EvalOnlyResult result;
  result.path = loaded.path;
  result.skipped = loaded.skipped;
  result.model = file.model();
  result.step = file.step();
  result.accuracy = static_cast<double>(r.correct) / data.test.size();
  result.loss = r.loss_sum / data.test.size();
  result.reported_accuracy = file.test_accuracy();
  return result;
}

absl::Status LoadInitialModel(const std::string& path, const models::Graph& graph, float* params,
                              size_t n) {
  R2SP_ASSIGN_OR_RETURN(models::LoadedModel loaded, models::LoadModelFile(path));
  for (const std::string& why : loaded.skipped) LOG(WARNING) << "passed over " << why;
  R2SP_RETURN_IF_ERROR(models::CheckModelFits(loaded.model, graph, loaded.path));
  std::memcpy(params, loaded.model.parameters().data(), n * sizeof(float));
  std::printf("worker 0: starting from %s (step %lld, accuracy %.4f)\n", loaded.path.c_str(),
              static_cast<long long>(loaded.model.step()), loaded.model.test_accuracy());
  return absl::OkStatus();
}

}  // namespace r2sp
