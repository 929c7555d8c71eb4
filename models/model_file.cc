// See model_file.h.
#include "models/model_file.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>  // paths only: the file system is the Env's
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crc32c.h"
#include "common/durable_file.h"
#include "common/status_macros.h"

namespace r2sp::models {
namespace {

constexpr char kMagic[8] = {'R', '2', 'S', 'P', 'M', 'O', 'D', 'L'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 4 + 8;
constexpr char kPrefix[] = "model-step";
constexpr char kSuffix[] = ".r2sp";

void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const std::string& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[at + i])} << (8 * i);
  return v;
}

absl::Status Corrupt(const std::string& name, const std::string& why) {
  return absl::DataLossError(absl::StrCat("model file ", name, ": ", why));
}

// The step in a model file's name, or -1 for another file.
int64_t StepOf(const std::string& file_name) {
  const size_t prefix = sizeof(kPrefix) - 1, suffix = sizeof(kSuffix) - 1;
  if (file_name.size() <= prefix + suffix || file_name.compare(0, prefix, kPrefix) != 0 ||
      file_name.compare(file_name.size() - suffix, suffix, kSuffix) != 0) {
    return -1;
  }
  const std::string digits = file_name.substr(prefix, file_name.size() - prefix - suffix);
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

// Model files in `dir`, newest (highest step) first (none if `dir` cannot be listed).
std::vector<std::string> ModelFilesNewestFirst(Env* env, const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  const absl::StatusOr<std::vector<std::string>> names = env->GetChildren(dir);
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>()) {
    const int64_t step = StepOf(name);
    if (step >= 0) found.emplace_back(step, (std::filesystem::path(dir) / name).string());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

absl::StatusOr<proto::ModelFile> ReadOne(Env* env, const std::string& path) {
  R2SP_ASSIGN_OR_RETURN(const std::string bytes,
                        WithContext(env->ReadFile(path), "cannot read a model file"));
  return DecodeModelFile(bytes, path);
}

}  // namespace

proto::ModelFile MakeModelFile(const Graph& graph, const float* params,
                               const std::vector<float>& batch_norm_statistics) {
  proto::ModelFile m;
  m.set_model(graph.name);
  m.set_channels(graph.input.c);
  m.set_height(graph.input.h);
  m.set_width(graph.input.w);
  m.set_num_classes(graph.num_classes);
  for (const Param& p : graph.params) {
    m.add_tensor_names(p.name);
    m.add_tensor_elements(p.size());
  }
  m.set_parameters(params, graph.num_parameters() * sizeof(float));
  m.set_batch_norm_statistics(batch_norm_statistics.data(),
                              batch_norm_statistics.size() * sizeof(float));
  m.set_test_accuracy(-1);
  return m;
}

std::string EncodeModelFile(const proto::ModelFile& model) {
  const std::string payload = model.SerializeAsString();
  std::string out(kMagic, sizeof(kMagic));
  PutLittleEndian(kVersion, 4, &out);
  PutLittleEndian(Crc32c(payload.data(), payload.size()), 4, &out);
  PutLittleEndian(payload.size(), 8, &out);
  return out + payload;
}

absl::StatusOr<proto::ModelFile> DecodeModelFile(const std::string& bytes,
                                                 const std::string& name) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Corrupt(name, "not a model file (no R2SPMODL header)");
  }
  const uint64_t version = GetLittleEndian(bytes, 8, 4);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("model file ", name, ": format version ",
                                                   version, ", this build reads ", kVersion));
  }
  const uint32_t crc = static_cast<uint32_t>(GetLittleEndian(bytes, 12, 4));
  const uint64_t length = GetLittleEndian(bytes, 16, 8);
  if (length != bytes.size() - kHeaderBytes) {
    return Corrupt(name, absl::StrCat("truncated or padded: the header says ", length,
                                      " payload bytes, the file has ",
                                      bytes.size() - kHeaderBytes));
  }
  if (Crc32c(bytes.data() + kHeaderBytes, length) != crc) {
    return Corrupt(name, "checksum mismatch (the file was damaged)");
  }
  proto::ModelFile model;
  if (!model.ParseFromArray(bytes.data() + kHeaderBytes, static_cast<int>(length))) {
    return Corrupt(name, "the payload does not parse");
  }
  if (model.tensor_names_size() != model.tensor_elements_size()) {
    return Corrupt(name, "tensor names and sizes differ in number");
  }
  uint64_t elements = 0;
  for (int64_t n : model.tensor_elements()) {
    if (n <= 0 || n > (int64_t{1} << 40)) return Corrupt(name, "a tensor size out of range");
    elements += static_cast<uint64_t>(n);
  }
  if (model.parameters().size() != elements * sizeof(float)) {
    return Corrupt(name, absl::StrCat(model.parameters().size(), " parameter bytes for ",
                                      elements, " parameters"));
  }
  if (model.batch_norm_statistics().size() % sizeof(float) != 0) {
    return Corrupt(name, "batch-norm statistics are not whole floats");
  }
  return model;
}

absl::Status CheckModelFits(const proto::ModelFile& model, const Graph& graph,
                            const std::string& name) {
  const auto unfit = [&name](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("model file ", name, " does not fit: ", why));
  };
  if (model.tensor_names_size() != static_cast<int>(graph.params.size())) {
    return unfit(absl::StrCat(model.tensor_names_size(), " tensors, the ", graph.name,
                              " model has ", graph.params.size()));
  }
  for (size_t i = 0; i < graph.params.size(); ++i) {
    if (model.tensor_names(i) != graph.params[i].name ||
        model.tensor_elements(i) != graph.params[i].size()) {
      return unfit(absl::StrCat("tensor ", i, " is ", model.tensor_names(i), " (",
                                model.tensor_elements(i), "), the model has ",
                                graph.params[i].name, " (", graph.params[i].size(), ")"));
    }
  }
  const uint64_t stats = model.batch_norm_statistics().size() / sizeof(float);
  if (stats != static_cast<uint64_t>(graph.BatchNormStatisticsSize())) {
    return unfit(absl::StrCat(stats, " batch-norm statistics, the model has ",
                              graph.BatchNormStatisticsSize()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteModelFile(const std::string& dir, const proto::ModelFile& model,
                                           int keep, Env* env) {
  R2SP_RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string path =
      absl::StrCat(dir, "/", kPrefix, absl::Dec(model.step(), absl::kZeroPad10), kSuffix);
  R2SP_RETURN_IF_ERROR(WriteFileAtomically(path, EncodeModelFile(model), env));
  const std::vector<std::string> files = ModelFilesNewestFirst(env, dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < files.size(); ++i) {
    env->RemoveAll(files[i]).IgnoreError();  // an old file left behind is harmless
  }
  return path;
}

absl::StatusOr<LoadedModel> LoadModelFile(const std::string& path, Env* env) {
  if (!env->IsDirectory(path)) {
    R2SP_ASSIGN_OR_RETURN(proto::ModelFile model, ReadOne(env, path));
    return LoadedModel{path, std::move(model), {}};
  }
  LoadedModel loaded;
  for (const std::string& file : ModelFilesNewestFirst(env, path)) {
    absl::StatusOr<proto::ModelFile> model = ReadOne(env, file);
    if (model.ok()) {
      loaded.path = file;
      loaded.model = *std::move(model);
      return loaded;
    }
    loaded.skipped.push_back(std::string(model.status().message()));
  }
  return absl::NotFoundError(absl::StrCat(
      "no usable model file (", kPrefix, "N", kSuffix, ") in ", path,
      loaded.skipped.empty() ? "" : ": ", absl::StrJoin(loaded.skipped, "; ")));
}

}  // namespace r2sp::models
