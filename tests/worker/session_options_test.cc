// SessionOptions::Validate: one case per check, each with its exact message (the nested parts'
// fields named by their path); and the job's mode over the options (JobExchangerOptions,
// CheckJobMode).
#include "worker/session_options.h"

#include <functional>
#include <string>
#include <vector>

#include "common/codec/codec_spec.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

struct Case {
  std::string name;
  std::function<void(SessionOptions&)> change;
  std::string message;
};

TEST(SessionOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(SessionOptions().Validate().ok()) << SessionOptions().Validate();
}

// What a test or the Python client builds by default is what the worker binary runs by default.
TEST(SessionOptionsTest, DefaultsAreTheBinarys) {
  const SessionOptions options;
  EXPECT_EQ(options.model, "synthetic");
  EXPECT_FALSE(options.external_model);
  EXPECT_EQ(options.batch_size, 64);
  EXPECT_EQ(options.seed, 1u);
  EXPECT_EQ(options.ps.dense_below, 16384u);
  EXPECT_TRUE(options.exchange.lookahead);
  EXPECT_TRUE(options.exchange.overlap_pulls);
  EXPECT_FALSE(options.exchange.overlap);
  EXPECT_EQ(options.ps.request_timeout, absl::Seconds(120));
  EXPECT_EQ(options.exchange.bucket_bytes, size_t{4} << 20);
  EXPECT_EQ(options.exchange.early_pulls_in_flight, 0);
  EXPECT_EQ(options.loop.epochs, 1);
  EXPECT_EQ(options.log_every, 0);
}

TEST(SessionOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case> cases = {
      {"connection",
       [](SessionOptions& o) { o.connection.heartbeat_period = absl::Milliseconds(5); },
       "--heartbeat_ms (NodeConnectionOptions.heartbeat_period) must be >= 10ms, got 5ms"},
      {"external_model_name",
       [](SessionOptions& o) {
         o.external_model = true;
         o.model = "synthetic";
       },
       "--model (SessionOptions.model) must be a name for the caller's model (not empty, not "
       "synthetic), got 'synthetic'"},
      {"batch_size", [](SessionOptions& o) { o.batch_size = 0; },
       "--batch_size (SessionOptions.batch_size) must be in [1, 65536], got 0"},
      {"batch_size_big", [](SessionOptions& o) { o.batch_size = 65537; },
       "--batch_size (SessionOptions.batch_size) must be in [1, 65536], got 65537"},
      {"log_every", [](SessionOptions& o) { o.log_every = -1; },
       "--log_every (SessionOptions.log_every) must be >= 0, got -1"},
      {"epochs", [](SessionOptions& o) { o.loop.epochs = 0; },
       "--epochs (SessionOptions.loop.epochs) must be >= 1, got 0"},
      {"max_steps", [](SessionOptions& o) { o.loop.max_steps = -1; },
       "--max_steps (SessionOptions.loop.max_steps) must be >= 0, got -1"},
      {"eval_every", [](SessionOptions& o) { o.loop.eval_every = -2; },
       "--eval_every (SessionOptions.loop.eval_every) must be >= 0, got -2"},
      {"slowdown", [](SessionOptions& o) { o.loop.compute_slowdown = 0.5; },
       "--compute_slowdown (SessionOptions.loop.compute_slowdown) must be in [1, 100], got 0.5"},
      {"emulate", [](SessionOptions& o) { o.loop.emulate_ms_per_sample = 1001; },
       "--emulate_ms_per_sample (SessionOptions.loop.emulate_ms_per_sample) must be in [0, "
       "1000], got 1001"},
      {"request_timeout", [](SessionOptions& o) { o.ps.request_timeout = absl::Milliseconds(10); },
       "--request_timeout_s (SessionOptions.ps.request_timeout) must be >= 1s, got 10ms"},
      {"push_codec", [](SessionOptions& o) { o.ps.push_codec.codec = proto::FP16_DELTA; },
       "--push_codec (SessionOptions.ps.push_codec) must be fp32, fp16, topk or csc (fp16_delta "
       "is for pulls), got 'fp16_delta'"},
      {"momentum_correction", [](SessionOptions& o) { o.ps.momentum_correction = 1; },
       "--momentum_correction (SessionOptions.ps.momentum_correction) must be in [0, 1), got 1"},
      {"pull_codec", [](SessionOptions& o) { o.exchange.pull_codec = proto::TOPK; },
       "--pull_codec (SessionOptions.exchange.pull_codec) must be fp32, fp16 or fp16_delta, got "
       "'topk:1'"},
      {"density_warmup", [](SessionOptions& o) { o.exchange.density_warmup_epochs = -1; },
       "--density_warmup_epochs (SessionOptions.exchange.density_warmup_epochs) must be >= 0, "
       "got -1"},
      {"lr", [](SessionOptions& o) { o.exchange.elastic.sgd.learning_rate = 0; },
       "--lr (SessionOptions.exchange.elastic.sgd.learning_rate) must be > 0, got 0"},
      {"momentum", [](SessionOptions& o) { o.exchange.elastic.sgd.momentum = 1; },
       "--momentum (SessionOptions.exchange.elastic.sgd.momentum) must be in [0, 1), got 1"},
      {"weight_decay", [](SessionOptions& o) { o.exchange.elastic.sgd.weight_decay = -0.5f; },
       "--weight_decay (SessionOptions.exchange.elastic.sgd.weight_decay) must be >= 0, got "
       "-0.5"},
      {"early_pulls_in_flight", [](SessionOptions& o) { o.exchange.early_pulls_in_flight = -1; },
       "--early_pulls_in_flight (SessionOptions.exchange.early_pulls_in_flight) must be >= 0, "
       "got -1"},
      {"early_pulls",
       [](SessionOptions& o) {
         o.exchange.early_pulls = true;
         o.exchange.overlap = true;
       },
       "--early_pulls (SessionOptions.exchange.early_pulls) does not go with --overlap "
       "(backward still reads the parameters while --overlap pushes) unless the compute reads "
       "a copy of them (the Python client's CUDA models)"},
  };
  for (const Case& c : cases) {
    SessionOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

// The caller's model has any name but the synthetic model's; the session does not check it
// against the worker binary's own models.
TEST(SessionOptionsTest, TheCallersModelHasItsOwnName) {
  SessionOptions options;
  options.external_model = true;
  options.model = "my_net";
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  options.model = "";
  EXPECT_EQ(options.Validate().message(),
            "--model (SessionOptions.model) must be a name for the caller's model (not empty, "
            "not synthetic), got ''");
}

// Early pulls with overlap where the compute reads its own copy of the parameters.
TEST(SessionOptionsTest, EarlyPullsGoWithOverlapWhereTheParametersAreStaged) {
  SessionOptions options;
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
       [](SessionOptions& o) {
         o.ps.push_codec = *codec::ParseCodecSpec("push_codec", "topk:0.01");
         o.ps.error_feedback = false;
       },
       "--error_feedback=false with a sparse --push_codec (the worker keeps what a push did not "
       "send through it) does not go with --sync=eawild yet (docs/MODES.md)"},
      {"momentum_correction", [](SessionOptions& o) { o.ps.momentum_correction = 0.9f; },
       "--momentum_correction does not go with --sync=eawild yet (docs/MODES.md)"},
      {"fp16_delta", [](SessionOptions& o) { o.exchange.pull_codec = proto::FP16_DELTA; },
       "--pull_codec=fp16_delta does not go with --sync=eawild yet (docs/MODES.md)"},
      {"overlap", [](SessionOptions& o) { o.exchange.overlap = true; },
       "--overlap does not go with --sync=eawild yet (docs/MODES.md)"},
      {"early_pulls", [](SessionOptions& o) { o.exchange.early_pulls = true; },
       "--early_pulls does not go with --sync=eawild yet (docs/MODES.md)"},
  };
  for (const Case& c : cases) {
    SessionOptions options;
    c.change(options);
    EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::ASP)).ok()) << c.name;
    const absl::Status status = CheckJobMode(options, ElasticBook(proto::EAWILD));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
  for (const char* sparse : {"topk:0.01", "csc:0.1"}) {  // with error feedback: accepted
    SessionOptions options;
    options.ps.push_codec = *codec::ParseCodecSpec("push_codec", sparse);
    EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EAWILD)).ok()) << sparse;
  }
  SessionOptions fp16;
  fp16.ps.push_codec = *codec::ParseCodecSpec("push_codec", "fp16");
  fp16.exchange.pull_codec = proto::FP16;
  EXPECT_TRUE(CheckJobMode(fp16, ElasticBook(proto::EASGD)).ok());
  proto::AddressBook no_period = ElasticBook(proto::EASGD);
  no_period.set_elastic_period(0);  // a scheduler that did not send it
  EXPECT_EQ(CheckJobMode(SessionOptions(), no_period).message(),
            "the address book's elastic period 0 or alpha 0.25 is out of range (a scheduler "
            "older than this worker?)");
}

TEST(CheckJobModeTest, TheAddressBookGivesThePeriodAndAlphaTheFlagsTheLocalStep) {
  SessionOptions options;
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
  SessionOptions options;
  options.external_model = true;
  options.model = "net";
  EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EAWILD)).ok());
  EXPECT_TRUE(CheckJobMode(options, ElasticBook(proto::EASGD)).ok());
  EXPECT_FALSE(JobExchangerOptions(options, ElasticBook(proto::EASGD)).elastic.local_step);
  options.exchange.overlap = true;
  EXPECT_EQ(CheckJobMode(options, ElasticBook(proto::EASGD)).message(),
            "--overlap does not go with --sync=easgd yet (docs/MODES.md)");
}

// A sparse push codec's ratio is the density the exchanger aims for; a dense one has no warm-up.
TEST(JobExchangerOptionsTest, ThePushCodecGivesTheDensity) {
  SessionOptions options;
  options.exchange.density_warmup_epochs = 2;
  EXPECT_EQ(JobExchangerOptions(options, ElasticBook(proto::ASP)).push_density, 1.0);
  EXPECT_EQ(JobExchangerOptions(options, ElasticBook(proto::ASP)).density_warmup_epochs, 0.0);
  options.ps.push_codec = *codec::ParseCodecSpec("push_codec", "topk:0.01");
  const ExchangerOptions mode = JobExchangerOptions(options, ElasticBook(proto::ASP));
  EXPECT_EQ(mode.push_density, 0.01);
  EXPECT_EQ(mode.density_warmup_epochs, 2.0);
  EXPECT_FALSE(mode.lookahead);  // the worker sets it for real models
}

}  // namespace
}  // namespace r2sp
