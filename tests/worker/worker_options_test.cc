// WorkerOptions::Validate: one case per check of the trainer's fields, each with its exact
// message (the nested parts' fields named by their path), and some of the session's checks
// (session_options_test.cc) under WorkerOptions' name.
#include "worker/worker_options.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/backend.h"

namespace r2sp {
namespace {

struct Case {
  std::string name;
  std::function<void(WorkerOptions&)> change;
  std::string message;
};

TEST(WorkerOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(WorkerOptions().Validate().ok()) << WorkerOptions().Validate();
}

// What a test or a benchmark builds by default is what the worker binary runs by default (the
// session's fields: session_options_test.cc).
TEST(WorkerOptionsTest, DefaultsAreTheBinarys) {
  const WorkerOptions options;
  EXPECT_EQ(options.data, "fashion-mnist");
  EXPECT_TRUE(options.batcher.augment);
  EXPECT_TRUE(options.workload.fp16_gradients);
  EXPECT_EQ(options.workload.keep_models, 3);
  EXPECT_EQ(options.workers_per_process, 1);
  EXPECT_TRUE(options.random_init);
  EXPECT_EQ(options.ps.dense_below, 16384u);  // WorkerPsDefaults, through SessionOptions
}

TEST(WorkerOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case> cases = {
      {"connection",
       [](WorkerOptions& o) { o.connection.heartbeat_period = absl::Milliseconds(5); },
       "--heartbeat_ms (NodeConnectionOptions.heartbeat_period) must be >= 10ms, got 5ms"},
      {"model", [](WorkerOptions& o) { o.model = "vgg"; },
       "--model (WorkerOptions.model) must be mlp, cnn, resnet20 or synthetic, got 'vgg'"},
      {"batch_size", [](WorkerOptions& o) { o.batch_size = 0; },
       "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 0"},
      {"init", [](WorkerOptions& o) { o.init_model_path = "/models"; },
       "--init=checkpoint: (WorkerOptions.init_model_path) is for real models (--model=mlp, cnn "
       "or resnet20)"},
      {"model_mb", [](WorkerOptions& o) { o.model_mb = 0; },
       "--model_mb (WorkerOptions.model_mb) must be in (0, 16384], got 0"},
      {"layers", [](WorkerOptions& o) { o.layers = 0; },
       "--layers (WorkerOptions.layers) must be in [1, 10000], got 0"},
      {"model_mb_layers",
       [](WorkerOptions& o) {
         o.model_mb = 0.001;  // 262 floats
         o.layers = 5;        // 325 biases
       },
       "--model_mb (WorkerOptions.model_mb) must be large enough for --layers (each layer has a "
       "64-float bias), got 0.001"},
      {"iterations", [](WorkerOptions& o) { o.iterations = -1; },
       "--iterations (WorkerOptions.iterations) must be >= 0, got -1"},
      {"compute_ms", [](WorkerOptions& o) { o.synthetic.compute_ms = -5; },
       "--compute_ms (WorkerOptions.synthetic.compute_ms) must be >= 0, got -5"},
      {"device", [](WorkerOptions& o) { o.backend.device = "tpu"; },
       "--device (WorkerOptions.backend.device) must be cpu or cuda, got 'tpu'"},
      {"threads", [](WorkerOptions& o) { o.backend.threads = -1; },
       "--threads (WorkerOptions.backend.threads) must be >= 0, got -1"},
      {"gpu", [](WorkerOptions& o) { o.backend.gpu = -1; },
       "--gpu (WorkerOptions.backend.gpu) must be >= 0, got -1"},
      {"keep_models", [](WorkerOptions& o) { o.workload.keep_models = 0; },
       "--keep_models (WorkerOptions.workload.keep_models) must be >= 1, got 0"},
      {"workers_per_process", [](WorkerOptions& o) { o.workers_per_process = 0; },
       "--workers_per_process (WorkerOptions.workers_per_process) must be >= 1, got 0"},
      {"workers_per_process_real",
       [](WorkerOptions& o) {
         o.model = "mlp";
         o.workers_per_process = 2;
       },
       "--workers_per_process (WorkerOptions.workers_per_process) above 1 is for the synthetic "
       "model only (--model=synthetic): real models load their data and network once per "
       "process"},
      {"session: epochs", [](WorkerOptions& o) { o.loop.epochs = 0; },
       "--epochs (WorkerOptions.loop.epochs) must be >= 1, got 0"},
      {"session: pull_codec", [](WorkerOptions& o) { o.exchange.pull_codec = proto::TOPK; },
       "--pull_codec (WorkerOptions.exchange.pull_codec) must be fp32, fp16 or fp16_delta, got "
       "'topk:1'"},
      {"session: external model",
       [](WorkerOptions& o) {
         o.external_model = true;
         o.model = "";
       },
       "--model (WorkerOptions.model) must be a name for the caller's model (not empty, not "
       "synthetic), got ''"},
  };
  for (const Case& c : cases) {
    WorkerOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

// The session's checks come first: a worker with a bad session field and a bad trainer field
// hears of the session's.
TEST(WorkerOptionsTest, TheSessionsChecksComeFirst) {
  WorkerOptions options;
  options.layers = 0;
  options.batch_size = 0;
  EXPECT_EQ(options.Validate().message(),
            "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 0");
}

// The caller's model (the Python client's) is not one of the binary's own.
TEST(WorkerOptionsTest, AnExternalModelHasItsOwnName) {
  WorkerOptions options;
  options.external_model = true;
  options.model = "my_net";
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

TEST(WorkerOptionsTest, CudaNeedsACudaBuild) {
  WorkerOptions options;
  options.backend.device = "cuda";
  const absl::Status status = options.Validate();
  if (models::CudaAvailableInBuild()) {
    EXPECT_TRUE(status.ok()) << status;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              "--device=cuda (WorkerOptions.backend.device) needs a worker built with CUDA "
              "(bazel build --config=cuda)");
  }
}

TEST(WorkerOptionsTest, RealModelsMayStartFromACheckpointAndIgnoreTheSyntheticSize) {
  WorkerOptions options;
  options.model = "mlp";
  options.init_model_path = "/models";
  options.model_mb = 0.001;
  options.layers = 5;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

}  // namespace
}  // namespace r2sp
