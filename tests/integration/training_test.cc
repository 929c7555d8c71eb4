// Real training through the parameter servers, as separate processes on 127.0.0.1: one server
// and two workers train the mlp on Fashion-MNIST (Debian's package) for a bounded number of
// steps and must reach 80% test accuracy, in both consistency modes. Also: a worker pointed
// at a missing data set stops at start with an error naming the file.
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
