// Real training through the parameter servers, as separate processes on 127.0.0.1: one server
// and two workers train the mlp on Fashion-MNIST (Debian's package) for a bounded number of
// steps and must reach 80% test accuracy, in both consistency modes. Also: a worker pointed
// at a missing data set stops at start with an error naming the file.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/local_job.h"

namespace r2sp {
namespace {

using testing::ChildProcess;

void TrainMlp(const std::string& sync) {
  testing::JobSpec spec;
  spec.name = "train_" + sync;
  spec.servers = 1;
  spec.workers = 2;
  spec.scheduler_flags = {"--sync=" + sync};
  spec.server_flags = {"--lr=0.02", "--momentum=0.9"};
  spec.worker_flags = {"--model=mlp", "--data=fashion-mnist", "--batch_size=64",
                       "--max_steps=400", "--threads=1"};
  testing::LocalJob job(spec);
  job.WaitAll(absl::Seconds(120));
  const std::string stats = job.Stats();
  EXPECT_GE(testing::ReportedAccuracy(stats), 0.80) << stats;
  EXPECT_NE(stats.find("\"model\": \"mlp\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"iterations\": 400"), std::string::npos) << stats;
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
  testing::JobSpec spec;
  spec.name = "resnet";
  spec.servers = 2;
  spec.workers = 1;
  spec.scheduler_flags = {"--partition_bytes=65536"};
  spec.server_flags = {"--lr=0.05"};
  spec.worker_flags = {"--model=resnet20", "--data=cifar10", "--data_dir=" + dir,
                       "--batch_size=16", "--max_steps=4", "--threads=1"};
  testing::LocalJob job(spec);
  job.WaitAll(absl::Seconds(120));
  const std::string stats = job.Stats();
  EXPECT_NE(stats.find("\"model\": \"resnet20\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"iterations\": 4"), std::string::npos) << stats;
  EXPECT_GE(testing::ReportedAccuracy(stats), 0.0) << stats;  // evaluated on the 40-image test batch
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
