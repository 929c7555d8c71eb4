// WorkerOptions::Validate: one case per check, each with its exact message (the nested
// parts' fields named by their path); and WorkerNode::Run returning the error before it loads,
// binds or registers anything.
#include "worker/worker_options.h"

#include <functional>
#include <string>
#include <vector>

#include "common/codec/codec_spec.h"
#include "gtest/gtest.h"
#include "models/backend.h"
#include "worker/worker_node.h"

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

// What a test or a benchmark builds by default is what the worker binary runs by default.
TEST(WorkerOptionsTest, DefaultsAreTheBinarys) {
  const WorkerOptions options;
  EXPECT_EQ(options.ps.dense_below, 16384u);
  EXPECT_TRUE(options.exchange.lookahead);
  EXPECT_TRUE(options.exchange.overlap_pulls);
  EXPECT_FALSE(options.exchange.overlap);
  EXPECT_TRUE(options.batcher.augment);
  EXPECT_TRUE(options.workload.fp16_gradients);
  EXPECT_EQ(options.ps.request_timeout, absl::Seconds(120));
  EXPECT_EQ(options.exchange.bucket_bytes, size_t{4} << 20);
  EXPECT_EQ(options.exchange.early_pulls_in_flight, 0);
  EXPECT_EQ(options.loop.epochs, 1);
  EXPECT_EQ(options.workload.keep_models, 3);
  EXPECT_EQ(options.log_every, 0);
}

TEST(WorkerOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case> cases = {
      {"connection", [](WorkerOptions& o) { o.connection.heartbeat_period = absl::Milliseconds(5); },
       "--heartbeat_ms (NodeConnectionOptions.heartbeat_period) must be >= 10ms, got 5ms"},
      {"model", [](WorkerOptions& o) { o.model = "vgg"; },
       "--model (WorkerOptions.model) must be mlp, cnn, resnet20 or synthetic, got 'vgg'"},
      {"batch_size", [](WorkerOptions& o) { o.batch_size = 0; },
       "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 0"},
      {"batch_size_big", [](WorkerOptions& o) { o.batch_size = 65537; },
       "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 65537"},
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
      {"log_every", [](WorkerOptions& o) { o.log_every = -1; },
       "--log_every (WorkerOptions.log_every) must be >= 0, got -1"},
      {"compute_ms", [](WorkerOptions& o) { o.synthetic.compute_ms = -5; },
       "--compute_ms (WorkerOptions.synthetic.compute_ms) must be >= 0, got -5"},
      {"epochs", [](WorkerOptions& o) { o.loop.epochs = 0; },
       "--epochs (WorkerOptions.loop.epochs) must be >= 1, got 0"},
      {"max_steps", [](WorkerOptions& o) { o.loop.max_steps = -1; },
       "--max_steps (WorkerOptions.loop.max_steps) must be >= 0, got -1"},
      {"eval_every", [](WorkerOptions& o) { o.loop.eval_every = -2; },
       "--eval_every (WorkerOptions.loop.eval_every) must be >= 0, got -2"},
      {"slowdown", [](WorkerOptions& o) { o.loop.compute_slowdown = 0.5; },
       "--compute_slowdown (WorkerOptions.loop.compute_slowdown) must be in [1, 100], got 0.5"},
      {"emulate", [](WorkerOptions& o) { o.loop.emulate_ms_per_sample = 1001; },
       "--emulate_ms_per_sample (WorkerOptions.loop.emulate_ms_per_sample) must be in [0, 1000], "
       "got 1001"},
      {"device", [](WorkerOptions& o) { o.backend.device = "tpu"; },
       "--device (WorkerOptions.backend.device) must be cpu or cuda, got 'tpu'"},
      {"threads", [](WorkerOptions& o) { o.backend.threads = -1; },
       "--threads (WorkerOptions.backend.threads) must be >= 0, got -1"},
      {"gpu", [](WorkerOptions& o) { o.backend.gpu = -1; },
       "--gpu (WorkerOptions.backend.gpu) must be >= 0, got -1"},
      {"keep_models", [](WorkerOptions& o) { o.workload.keep_models = 0; },
       "--keep_models (WorkerOptions.workload.keep_models) must be >= 1, got 0"},
      {"request_timeout", [](WorkerOptions& o) { o.ps.request_timeout = absl::Milliseconds(10); },
       "--request_timeout_s (WorkerOptions.ps.request_timeout) must be >= 1s, got 10ms"},
      {"push_codec", [](WorkerOptions& o) { o.ps.push_codec.codec = proto::FP16_DELTA; },
       "--push_codec (WorkerOptions.ps.push_codec) must be fp32, fp16, topk or csc (fp16_delta is "
       "for pulls), got 'fp16_delta'"},
      {"momentum_correction", [](WorkerOptions& o) { o.ps.momentum_correction = 1; },
       "--momentum_correction (WorkerOptions.ps.momentum_correction) must be in [0, 1), got 1"},
      {"pull_codec", [](WorkerOptions& o) { o.exchange.pull_codec = proto::TOPK; },
       "--pull_codec (WorkerOptions.exchange.pull_codec) must be fp32, fp16 or fp16_delta, got "
       "'topk:1'"},
      {"density_warmup", [](WorkerOptions& o) { o.exchange.density_warmup_epochs = -1; },
       "--density_warmup_epochs (WorkerOptions.exchange.density_warmup_epochs) must be >= 0, got "
       "-1"},
      {"lr", [](WorkerOptions& o) { o.exchange.elastic.sgd.learning_rate = 0; },
       "--lr (WorkerOptions.exchange.elastic.sgd.learning_rate) must be > 0, got 0"},
      {"momentum", [](WorkerOptions& o) { o.exchange.elastic.sgd.momentum = 1; },
       "--momentum (WorkerOptions.exchange.elastic.sgd.momentum) must be in [0, 1), got 1"},
      {"weight_decay", [](WorkerOptions& o) { o.exchange.elastic.sgd.weight_decay = -0.5f; },
       "--weight_decay (WorkerOptions.exchange.elastic.sgd.weight_decay) must be >= 0, got -0.5"},
      {"early_pulls_in_flight", [](WorkerOptions& o) { o.exchange.early_pulls_in_flight = -1; },
       "--early_pulls_in_flight (WorkerOptions.exchange.early_pulls_in_flight) must be >= 0, got "
       "-1"},
      {"early_pulls",
       [](WorkerOptions& o) {
         o.exchange.early_pulls = true;
         o.exchange.overlap = true;
       },
       "--early_pulls (WorkerOptions.exchange.early_pulls) does not go with --overlap (backward "
       "still reads the parameters while --overlap pushes) unless the compute reads a copy of "
       "them (the Python client's CUDA models)"},
  };
  for (const Case& c : cases) {
    WorkerOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

// Early pulls with overlap where the compute reads its own copy of the parameters.
TEST(WorkerOptionsTest, EarlyPullsGoWithOverlapWhereTheParametersAreStaged) {
  WorkerOptions options;
  options.exchange.early_pulls = true;
  options.exchange.overlap = true;
  options.exchange.params_staged = true;
  EXPECT_TRUE(options.Validate().ok());
}

proto::AddressBook ElasticBook(proto::SyncMode sync) {
  proto::AddressBook book;
  book.set_sync(sync);
  book.set_elastic_period(3);
  book.set_elastic_alpha(0.25);
  return book;
}

// What elastic averaging cannot run with yet is refused once the address book names the mode.
TEST(CheckJobModeTest, ElasticModesRefuseWhatTheyCannotRunWith) {
  const std::vector<Case> cases = {
      {"topk without error feedback",
       [](WorkerOptions& o) {
         o.ps.push_codec = *codec::ParseCodecSpec("push_codec", "topk:0.01");
         o.ps.error_feedback = false;
       },
       "--error_feedback=false with a sparse --push_codec (the worker keeps what a push did not "
       "send through it) does not go with --sync=eawild yet (docs/MODES.md)"},
      {"momentum_correction", [](WorkerOptions& o) { o.ps.momentum_correction = 0.9f; },
       "--momentum_correction does not go with --sync=eawild yet (docs/MODES.md)"},
      {"fp16_delta", [](WorkerOptions& o) { o.exchange.pull_codec = proto::FP16_DELTA; },
       "--pull_codec=fp16_delta does not go with --sync=eawild yet (docs/MODES.md)"},
      {"overlap", [](WorkerOptions& o) { o.exchange.overlap = true; },
       "--overlap does not go with --sync=eawild yet (docs/MODES.md)"},
      {"early_pulls", [](WorkerOptions& o) { o.exchange.early_pulls = true; },
       "--early_pulls does not go with --sync=eawild yet (docs/MODES.md)"},
  };
  for (const Case& c : cases) {
    WorkerOptions options;
    c.change(options);
    EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::ASP)).ok()) << c.name;
    const absl::Status status = CheckJobMode(options, ElasticBook(proto::EAWILD));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
  for (const char* sparse : {"topk:0.01", "csc:0.1"}) {  // with error feedback: accepted
    WorkerOptions options;
    options.ps.push_codec = *codec::ParseCodecSpec("push_codec", sparse);
    EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EAWILD)).ok()) << sparse;
  }
  WorkerOptions fp16;
  fp16.ps.push_codec = *codec::ParseCodecSpec("push_codec", "fp16");
  fp16.exchange.pull_codec = proto::FP16;
  EXPECT_TRUE(CheckJobMode(fp16, ElasticBook(proto::EASGD)).ok());
  proto::AddressBook no_period = ElasticBook(proto::EASGD);
  no_period.set_elastic_period(0);  // a scheduler that did not send it
  EXPECT_EQ(CheckJobMode(WorkerOptions(), no_period).message(),
            "the address book's elastic period 0 or alpha 0.25 is out of range (a scheduler "
            "older than this worker?)");
}

TEST(CheckJobModeTest, TheAddressBookGivesThePeriodAndAlphaTheFlagsTheLocalStep) {
  WorkerOptions options;
  options.exchange.elastic.sgd = {0.05f, 0.5f, 0.001f};
  const ExchangerOptions mode = JobExchangerOptions(options, ElasticBook(proto::EASGD));
  EXPECT_EQ(mode.sync, proto::EASGD);
  EXPECT_EQ(mode.elastic.period, 3);
  EXPECT_EQ(mode.elastic.alpha, 0.25f);
  EXPECT_EQ(mode.elastic.sgd.learning_rate, 0.05f);
  EXPECT_EQ(mode.elastic.sgd.momentum, 0.5f);
  EXPECT_EQ(mode.elastic.sgd.weight_decay, 0.001f);
  EXPECT_TRUE(mode.elastic.local_step);
}

// The Python client runs elastic modes, its script's optimizer taking the local step.
TEST(CheckJobModeTest, ThePythonClientTakesItsOwnLocalStep) {
  WorkerOptions options;
  options.external_model = true;
  options.model = "net";
  EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EAWILD)).ok());
  EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EASGD)).ok());
  EXPECT_FALSE(JobExchangerOptions(options, ElasticBook(proto::EASGD)).elastic.local_step);
  options.exchange.overlap = true;
  EXPECT_EQ(CheckJobMode(options, ElasticBook(proto::EASGD)).message(),
            "--overlap does not go with --sync=easgd yet (docs/MODES.md)");
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

TEST(WorkerOptionsTest, RunReturnsTheValidateErrorBeforeAnythingStarts) {
  WorkerOptions options;
  options.loop.epochs = 0;
  options.connection.bind = "tcp://no-such-interface-r2sp:*";  // never reached
  WorkerNode node(options);
  const absl::Status status = node.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--epochs (WorkerOptions.loop.epochs) must be >= 1, got 0");
}

}  // namespace
}  // namespace r2sp
