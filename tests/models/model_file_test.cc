// models/model_file: round trip; every kind of damage (truncation, a flipped bit, another
// format, inconsistent parts) is a clear error naming the file; a directory falls back from a
// corrupt newest file to the one before; old files are pruned; a file must fit its graph; a
// write whose fsync fails, that is torn, that fills the disk or whose rename fails is a clear
// error and leaves the previous model file, which is what a load reads.
#include "models/model_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fault_injection_env.h"
#include "tests/testing/status_assert.h"

namespace r2sp::models {
namespace {

proto::ModelFile CnnModel(int64_t step, float fill) {
  const Graph g = BuildCnn({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters(), fill);
  proto::ModelFile m = MakeModelFile(g, params.data(), {});
  m.set_step(step);
  m.set_test_accuracy(0.5 + step / 1000.0);
  return m;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(ModelFileTest, RoundTripKeepsEverything) {
  const Graph g = BuildResNet20({3, 32, 32}, 10);
  std::vector<float> params(g.num_parameters());
  for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>(i % 97) - 48.5f;
  std::vector<float> stats(g.BatchNormStatisticsSize(), 0.25f);
  proto::ModelFile m = MakeModelFile(g, params.data(), stats);
  EXPECT_EQ(m.model(), "resnet20");
  EXPECT_EQ(m.channels(), 3);
  EXPECT_EQ(m.test_accuracy(), -1);
  absl::StatusOr<proto::ModelFile> back = DecodeModelFile(EncodeModelFile(m), "f");
  ASSERT_OK(back.status());
  EXPECT_EQ(back->SerializeAsString(), m.SerializeAsString());
  ASSERT_OK(CheckModelFits(*back, g, "f"));
}

TEST(ModelFileTest, DamageIsAClearErrorNamingTheFile) {
  const std::string good = EncodeModelFile(CnnModel(7, 1.0f));
  struct Case {
    std::string what, bytes, expect;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  std::string other_version = good;
  other_version[8] = 2;
  proto::ModelFile short_params = CnnModel(7, 1.0f);
  short_params.mutable_parameters()->resize(12);
  proto::ModelFile odd_stats = CnnModel(7, 1.0f);
  odd_stats.set_batch_norm_statistics("abc");
  proto::ModelFile mismatched = CnnModel(7, 1.0f);
  mismatched.add_tensor_names("extra");
  const std::vector<Case> cases = {
      {"empty", "", "no R2SPMODL header"},
      {"another format", "PK\x03\x04 a zip file, not a model file", "no R2SPMODL header"},
      {"truncated", good.substr(0, good.size() - 100), "truncated"},
      {"padded", good + "xx", "truncated or padded"},
      {"flipped bit", flipped, "checksum mismatch"},
      {"another version", other_version, "format version 2"},
      {"parameters short", EncodeModelFile(short_params), "parameter bytes for"},
      {"statistics not floats", EncodeModelFile(odd_stats), "not whole floats"},
      {"names and sizes", EncodeModelFile(mismatched), "differ in number"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<proto::ModelFile> m = DecodeModelFile(c.bytes, "/runs/x/model-step7.r2sp");
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_NE(m.status().message().find("/runs/x/model-step7.r2sp"), std::string::npos) << c.what;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos)
        << c.what << ": " << m.status();
  }
}

TEST(ModelFileTest, AFileMustFitTheModelItsNameBuilds) {
  const proto::ModelFile cnn = CnnModel(1, 0.0f);
  const absl::Status fits_mlp = CheckModelFits(cnn, BuildMlp({1, 28, 28}, 10), "m.r2sp");
  EXPECT_TRUE(absl::IsInvalidArgument(fits_mlp));
  EXPECT_NE(fits_mlp.message().find("m.r2sp does not fit"), std::string::npos) << fits_mlp;
  // Right tensors, but batch-norm statistics for a model without batch norm.
  proto::ModelFile with_stats = cnn;
  with_stats.set_batch_norm_statistics(std::string(8, '\0'));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CheckModelFits(with_stats, BuildCnn({1, 28, 28}, 10), "m.r2sp")));
}

TEST(ModelFileTest, DirectoryGivesTheNewestGoodFileAndKeepsTheNewestFew) {
  const std::string dir = FreshDir("model_files");
  std::vector<std::string> paths;
  for (int64_t step : {100, 200, 300, 400}) {
    absl::StatusOr<std::string> p = WriteModelFile(dir, CnnModel(step, step), /*keep=*/3);
    ASSERT_OK(p.status());
    paths.push_back(*p);
  }
  EXPECT_FALSE(std::filesystem::exists(paths[0]));  // pruned: only the newest 3 stay
  absl::StatusOr<LoadedModel> newest = LoadModelFile(dir);
  ASSERT_OK(newest.status());
  EXPECT_EQ(newest->path, paths[3]);
  EXPECT_EQ(newest->model.step(), 400);
  EXPECT_TRUE(newest->skipped.empty());

  // A damaged newest file: the one before is used, and the reason is kept.
  std::string bytes = ReadBytes(paths[3]);
  bytes[bytes.size() - 5] ^= 1;
  WriteBytes(paths[3], bytes);
  absl::StatusOr<LoadedModel> fallback = LoadModelFile(dir);
  ASSERT_OK(fallback.status());
  EXPECT_EQ(fallback->model.step(), 300);
  ASSERT_EQ(fallback->skipped.size(), 1u);
  EXPECT_NE(fallback->skipped[0].find(paths[3]), std::string::npos);
  EXPECT_NE(fallback->skipped[0].find("checksum"), std::string::npos);
  // Naming the damaged file itself is an error, not a silent fallback.
  EXPECT_TRUE(absl::IsDataLoss(LoadModelFile(paths[3]).status()));

  // Nothing usable at all: NotFound listing what was passed over.
  WriteBytes(paths[1], "junk");
  WriteBytes(paths[2], "");
  absl::StatusOr<LoadedModel> none = LoadModelFile(dir);
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find(paths[1]), std::string::npos) << none.status();
  EXPECT_TRUE(absl::IsNotFound(LoadModelFile(dir + "/missing.r2sp").status()));
  EXPECT_TRUE(absl::IsNotFound(LoadModelFile(FreshDir("model_files_empty")).status()));
}

TEST(ModelFileTest, AFailedWriteLeavesThePreviousFileForLoading) {
  using ::r2sp::testing::FaultInjectionEnv;
  using ::r2sp::testing::FileFault;
  const std::string dir = FreshDir("model_files_faults");
  FaultInjectionEnv env;
  ASSERT_OK(WriteModelFile(dir, CnnModel(100, 1.0f), /*keep=*/1, &env).status());
  const std::string good = dir + "/model-step0000000100.r2sp";
  const std::string tmp = dir + "/model-step0000000200.r2sp.tmp";
  const struct {
    FileFault fault;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {FileFault::kFailedSync, absl::StatusCode::kUnavailable,
       "cannot fsync " + tmp + ": Input/output error"},
      {FileFault::kTornWrite, absl::StatusCode::kUnavailable,
       "cannot write " + tmp + ": Input/output error"},
      {FileFault::kNoSpace, absl::StatusCode::kResourceExhausted,
       "cannot write " + tmp + ": No space left on device"},
      {FileFault::kFailedRename, absl::StatusCode::kUnavailable,
       "cannot rename " + tmp + " to " + dir + "/model-step0000000200.r2sp: Input/output error"},
  };
  for (const auto& c : cases) {
    env.Inject(c.fault, dir);
    const absl::StatusOr<std::string> failed =
        WriteModelFile(dir, CnnModel(200, 2.0f), /*keep=*/1, &env);
    EXPECT_EQ(failed.status().code(), c.code) << failed.status();
    EXPECT_EQ(failed.status().message(), c.message);
    std::vector<std::string> names = env.GetChildren(dir).value_or(std::vector<std::string>{});
    EXPECT_EQ(names, std::vector<std::string>{"model-step0000000100.r2sp"}) << c.message;
    absl::StatusOr<LoadedModel> loaded = LoadModelFile(dir);
    ASSERT_OK(loaded.status());
    EXPECT_EQ(loaded->path, good);
    EXPECT_EQ(loaded->model.step(), 100);
    EXPECT_TRUE(loaded->skipped.empty());
  }
  EXPECT_EQ(env.fired(), 4);
  // A later write works and prunes the old file (keep 1).
  ASSERT_OK(WriteModelFile(dir, CnnModel(300, 3.0f), 1, &env).status());
  EXPECT_EQ(LoadModelFile(dir, &env)->model.step(), 300);
  EXPECT_FALSE(std::filesystem::exists(good));
}

TEST(ModelFileTest, AMissingFileIsNotFoundNamingIt) {
  const std::string missing = FreshDir("model_files_missing") + "/missing.r2sp";
  EXPECT_EQ(LoadModelFile(missing).status(),
            absl::NotFoundError("cannot read a model file: cannot open " + missing +
                                ": No such file or directory"));
}

}  // namespace
}  // namespace r2sp::models
