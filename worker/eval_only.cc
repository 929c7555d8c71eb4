// See eval_only.h.
#include "worker/eval_only.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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

}  // namespace r2sp
