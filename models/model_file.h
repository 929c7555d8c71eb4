// Model files: a trained model as the evaluating worker saw it (parameters, batch-norm running
// statistics, the model's name and shapes, the step and the accuracy it reported), written with
// every evaluation and read back by `worker --eval_only --init=checkpoint:FILE`.
//
// Layout: the magic "R2SPMODL", a little-endian u32 format version (1), u32 CRC-32C of the
// payload and u64 payload length, then the payload, a serialized proto::ModelFile. Files are
// written atomically as DIR/model-step<STEP>.r2sp; the newest `keep` are kept. Files are
// written and read through an Env (common/env.h), the POSIX one unless a test gives another.
#ifndef R2SP_MODELS_MODEL_FILE_H_
#define R2SP_MODELS_MODEL_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "models/graph.h"
#include "proto/checkpoint.pb.h"

namespace r2sp::models {

// A model file of `graph` at `params` (num_parameters floats) with its batch-norm statistics;
// the caller adds the step, epoch, accuracy and data set.
proto::ModelFile MakeModelFile(const Graph& graph, const float* params,
                               const std::vector<float>& batch_norm_statistics);

// The bytes of a model file holding `model`.
std::string EncodeModelFile(const proto::ModelFile& model);

// Decodes and verifies a model file's bytes: magic, version, length, checksum, the payload, and
// that its parts agree (tensor sizes add up to the parameters, whole floats). DataLoss (or
// InvalidArgument) naming `name` and what is wrong.
absl::StatusOr<proto::ModelFile> DecodeModelFile(const std::string& bytes,
                                                 const std::string& name);

// Whether `model` fits `graph` (built from its name and shapes): the same tensors in the same
// order and sizes, and the graph's batch-norm statistics. InvalidArgument naming `name`.
absl::Status CheckModelFits(const proto::ModelFile& model, const Graph& graph,
                            const std::string& name);

// Writes `model` as DIR/model-step<step>.r2sp (creating DIR) through `env`, atomically and
// durably (common/durable_file.h), and removes all but the newest `keep` (>= 1) model files
// there. Returns the file's path. On an error (the Env's, naming the file and the operation)
// the model files already there are untouched.
absl::StatusOr<std::string> WriteModelFile(const std::string& dir, const proto::ModelFile& model,
                                           int keep, Env* env = Env::Default());

struct LoadedModel {
  std::string path;  // the file read
  proto::ModelFile model;
  // Newer files in the directory that did not verify, each with why.
  std::vector<std::string> skipped;
};

// `path` is a model file, or a directory of them: then the newest that verifies (older ones
// are the fallback for a corrupt newest one). NotFound when there is none, with every file
// passed over and why.
absl::StatusOr<LoadedModel> LoadModelFile(const std::string& path, Env* env = Env::Default());

}  // namespace r2sp::models

#endif  // R2SP_MODELS_MODEL_FILE_H_
