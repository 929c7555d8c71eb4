// Real training through the parameter servers, as separate processes on 127.0.0.1: one server
// and two workers train the mlp on Fashion-MNIST (Debian's package) for a bounded number of
// steps and must reach 80% test accuracy, in both consistency modes. Also: a worker pointed
// at a missing data set stops at start with an error naming the file.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"

namespace r2sp {
namespace {

using testing::ChildProcess;

// The "test_accuracy" of the worker that evaluated, from the scheduler's stats JSON.
double ReportedAccuracy(const std::string& stats) {
  const std::string key = "\"test_accuracy\": ";
  double best = -1;
  for (size_t at = stats.find(key); at != std::string::npos; at = stats.find(key, at + 1)) {
    const size_t start = at + key.size();
    const size_t end = stats.find_first_of(",}", start);
    double v;
    if (absl::SimpleAtod(stats.substr(start, end - start), &v)) best = std::max(best, v);
  }
  return best;
}

void TrainMlp(const std::string& sync) {
  const std::string dir = testing::MakeTempDir("train_" + sync);
  ChildProcess scheduler({"scheduler/scheduler", "--bind=tcp://127.0.0.1:*",
                          "--endpoint_file=" + dir + "/endpoint", "--stats_json=" + dir + "/stats.json",
                          "--num_servers=1", "--num_workers=2", "--sync=" + sync},
                         dir + "/scheduler.log");
  std::string endpoint = testing::WaitForFile(dir + "/endpoint", absl::Seconds(20));
  ASSERT_FALSE(endpoint.empty()) << scheduler.Log();
  endpoint.pop_back();
  ChildProcess server({"server/server", "--scheduler=" + endpoint, "--bind=tcp://127.0.0.1:*",
                       "--lr=0.02", "--momentum=0.9"},
                      dir + "/server.log");
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{"worker/worker", "--scheduler=" + endpoint,
                                 "--bind=tcp://127.0.0.1:*", "--model=mlp",
                                 "--data=fashion-mnist", "--batch_size=64", "--max_steps=300",
                                 "--threads=1"},
        absl::StrCat(dir, "/worker", i, ".log")));
  }
  for (auto& w : workers) EXPECT_EQ(w->Wait(absl::Seconds(120)), 0) << w->Log();
  EXPECT_EQ(server.Wait(absl::Seconds(30)), 0) << server.Log();
  EXPECT_EQ(scheduler.Wait(absl::Seconds(30)), 0) << scheduler.Log();
  const std::string stats = testing::ReadFile(dir + "/stats.json");
  const double accuracy = ReportedAccuracy(stats);
  EXPECT_GE(accuracy, 0.80) << stats;
  EXPECT_NE(stats.find("\"model\": \"mlp\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"iterations\": 300"), std::string::npos) << stats;
}

TEST(TrainingTest, AsyncMlpOnFashionMnistReaches80Percent) { TrainMlp("asp"); }

TEST(TrainingTest, SyncMlpOnFashionMnistReaches80Percent) { TrainMlp("bsp"); }

// ResNet-20 on CIFAR-10 files written in the exact binary format (the real set is not
// packaged): the whole path — loader, augmentation, batch norm, residual blocks, two servers —
// runs a few steps and reports.
TEST(TrainingTest, ResNet20OnCifarFormatFilesRuns) {
  const std::string dir = testing::MakeTempDir("cifar");
  std::string records;
  for (int r = 0; r < 40; ++r) {
    records.push_back(static_cast<char>(r % 10));
    for (int i = 0; i < 3072; ++i) records.push_back(static_cast<char>((i * 7 + r * 13) % 256));
  }
  for (const std::string name : {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                                 "data_batch_5", "test_batch"}) {
    std::ofstream(absl::StrCat(dir, "/", name, ".bin"), std::ios::binary) << records;
  }
  ChildProcess scheduler({"scheduler/scheduler", "--bind=tcp://127.0.0.1:*",
                          "--endpoint_file=" + dir + "/endpoint", "--stats_json=" + dir + "/stats.json",
                          "--num_servers=2", "--num_workers=1", "--partition_bytes=65536"},
                         dir + "/scheduler.log");
  std::string endpoint = testing::WaitForFile(dir + "/endpoint", absl::Seconds(20));
  ASSERT_FALSE(endpoint.empty()) << scheduler.Log();
  endpoint.pop_back();
  std::vector<std::unique_ptr<ChildProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{"server/server", "--scheduler=" + endpoint,
                                 "--bind=tcp://127.0.0.1:*", "--lr=0.05"},
        absl::StrCat(dir, "/server", i, ".log")));
  }
  ChildProcess worker({"worker/worker", "--scheduler=" + endpoint, "--bind=tcp://127.0.0.1:*",
                       "--model=resnet20", "--data=cifar10", "--data_dir=" + dir,
                       "--batch_size=16", "--max_steps=4", "--threads=1"},
                      dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(120)), 0) << worker.Log();
  for (auto& s : servers) EXPECT_EQ(s->Wait(absl::Seconds(30)), 0) << s->Log();
  EXPECT_EQ(scheduler.Wait(absl::Seconds(30)), 0) << scheduler.Log();
  const std::string stats = testing::ReadFile(dir + "/stats.json");
  EXPECT_NE(stats.find("\"model\": \"resnet20\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"iterations\": 4"), std::string::npos) << stats;
  EXPECT_GE(ReportedAccuracy(stats), 0.0) << stats;  // evaluated on the 40-image test batch
}

TEST(TrainingTest, MissingDataSetIsAClearErrorAtStart) {
  const std::string dir = testing::MakeTempDir("nodata");
  ChildProcess worker({"worker/worker", "--model=cnn", "--data=mnist", "--data_dir=" + dir,
                       "--scheduler=tcp://127.0.0.1:1"},
                      dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_NE(worker.Log().find(dir + "/train-images-idx3-ubyte.gz: no such file"),
            std::string::npos)
      << worker.Log();
  ChildProcess no_dir({"worker/worker", "--model=cnn", "--data=cifar10"}, dir + "/nodir.log");
  EXPECT_EQ(no_dir.Wait(absl::Seconds(20)), 2) << no_dir.Log();
  EXPECT_NE(no_dir.Log().find("--data_dir is required"), std::string::npos) << no_dir.Log();
}

}  // namespace
}  // namespace r2sp
