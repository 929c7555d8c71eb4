// SessionOptionsFromMap against the worker binary's flags (linked here: //worker:main_flags):
// the same names, types and defaults, the same options from the same values; how each type of
// value is read; the exact errors; and the connection's keys with auth=curve.
#include "worker/session_option_map.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/auth/curve_keys.h"
#include "common/codec/codec_spec.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"
#include "worker/worker_flags.h"

namespace r2sp {
namespace {

using Values = std::map<std::string, OptionValue>;

void ExpectSameSession(const SessionOptions& a, const SessionOptions& b) {
  EXPECT_EQ(a.connection.scheduler, b.connection.scheduler);
  EXPECT_EQ(a.connection.bind, b.connection.bind);
  EXPECT_EQ(a.connection.advertise_host, b.connection.advertise_host);
  EXPECT_EQ(a.connection.register_timeout, b.connection.register_timeout);
  EXPECT_EQ(a.connection.heartbeat_period, b.connection.heartbeat_period);
  EXPECT_EQ(a.connection.scheduler_timeout, b.connection.scheduler_timeout);
  EXPECT_EQ(a.connection.io_threads, b.connection.io_threads);
  EXPECT_EQ(a.connection.connections_per_peer, b.connection.connections_per_peer);
  ASSERT_EQ(a.connection.curve == nullptr, b.connection.curve == nullptr);
  if (a.connection.curve != nullptr) {
    EXPECT_EQ(a.connection.curve->role, b.connection.curve->role);
    EXPECT_EQ(a.connection.curve->public_key, b.connection.curve->public_key);
    EXPECT_EQ(a.connection.curve->secret_key, b.connection.curve->secret_key);
    EXPECT_EQ(a.connection.curve->public_keys, b.connection.curve->public_keys);
  }
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.external_model, b.external_model);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.batch_size, b.batch_size);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.dump_params_path, b.dump_params_path);
  EXPECT_EQ(a.metrics_path, b.metrics_path);
  EXPECT_EQ(a.timeline_path, b.timeline_path);
  EXPECT_EQ(a.log_every, b.log_every);
  EXPECT_EQ(a.loop.epochs, b.loop.epochs);
  EXPECT_EQ(a.loop.max_steps, b.loop.max_steps);
  EXPECT_EQ(a.loop.eval_every, b.loop.eval_every);
  EXPECT_EQ(a.loop.compute_slowdown, b.loop.compute_slowdown);
  EXPECT_EQ(a.loop.emulate_ms_per_sample, b.loop.emulate_ms_per_sample);
  EXPECT_EQ(a.loop.log_every, b.loop.log_every);
  EXPECT_EQ(a.ps.request_timeout, b.ps.request_timeout);
  EXPECT_EQ(codec::CodecSpecName(a.ps.push_codec), codec::CodecSpecName(b.ps.push_codec));
  EXPECT_EQ(a.ps.error_feedback, b.ps.error_feedback);
  EXPECT_EQ(a.ps.momentum_correction, b.ps.momentum_correction);
  EXPECT_EQ(a.ps.dense_below, b.ps.dense_below);
  EXPECT_EQ(a.exchange.lookahead, b.exchange.lookahead);
  EXPECT_EQ(a.exchange.pull_codec, b.exchange.pull_codec);
  EXPECT_EQ(a.exchange.overlap, b.exchange.overlap);
  EXPECT_EQ(a.exchange.overlap_pulls, b.exchange.overlap_pulls);
  EXPECT_EQ(a.exchange.bucket_bytes, b.exchange.bucket_bytes);
  EXPECT_EQ(a.exchange.early_pulls, b.exchange.early_pulls);
  EXPECT_EQ(a.exchange.early_pulls_in_flight, b.exchange.early_pulls_in_flight);
  EXPECT_EQ(a.exchange.density_warmup_epochs, b.exchange.density_warmup_epochs);
  EXPECT_EQ(a.exchange.elastic.sgd.learning_rate, b.exchange.elastic.sgd.learning_rate);
  EXPECT_EQ(a.exchange.elastic.sgd.momentum, b.exchange.elastic.sgd.momentum);
  EXPECT_EQ(a.exchange.elastic.sgd.weight_decay, b.exchange.elastic.sgd.weight_decay);
}

// Sets worker flags as the command line would (under a gflags::FlagSaver of the caller's).
void SetFlags(const std::map<std::string, std::string>& flags) {
  for (const auto& [name, value] : flags) {
    ASSERT_FALSE(gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty())
        << "--" << name << "=" << value;
  }
}

// The map's error for `values` ("" if it took them).
std::string ErrorOf(const Values& values) {
  const absl::StatusOr<SessionOptions> options = SessionOptionsFromMap(values);
  if (options.ok()) return "";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(options.status().message());
}

// One flag's default is the option's: same name, same type, same text as --help shows it.
TEST(SessionOptionMapTest, EachOptionIsAWorkerFlagWithItsDefault) {
  const std::vector<std::string> names = SessionOptionNames();
  ASSERT_FALSE(names.empty());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& name : names) {
    gflags::CommandLineFlagInfo flag;
    ASSERT_TRUE(gflags::GetCommandLineFlagInfo(name.c_str(), &flag)) << name;
    EXPECT_EQ(flag.type, SessionOptionType(name).value()) << name;
    EXPECT_EQ(flag.default_value, SessionOptionDefault(name).value()) << name;
  }
  EXPECT_EQ(SessionOptionDefault("data").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SessionOptionType("bogus").status().code(), absl::StatusCode::kNotFound);
}

// Every worker flag is an option, or the binary's own model's (refused by name).
TEST(SessionOptionMapTest, EveryWorkerFlagIsAnOptionOrTheModels) {
  const std::vector<std::string> names = SessionOptionNames();
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  int worker_flags = 0;
  for (const gflags::CommandLineFlagInfo& flag : flags) {
    if (!absl::EndsWith(flag.filename, "worker/main_flags.cc") &&
        !absl::EndsWith(flag.filename, "common/node_flags.cc")) {
      continue;
    }
    ++worker_flags;
    if (std::find(names.begin(), names.end(), flag.name) != names.end()) continue;
    const std::string error = ErrorOf({{flag.name, flag.default_value}});
    EXPECT_TRUE(absl::StrContains(error, "belongs to the C++ worker's own model") ||
                absl::StrContains(error, "deprecated alias"))
        << flag.name << ": " << error;
  }
  EXPECT_GT(worker_flags, static_cast<int>(names.size()));
}

// With no values the options are the worker binary's with no flags.
TEST(SessionOptionMapTest, TheDefaultsAreTheBinarysWithNoFlags) {
  const absl::StatusOr<SessionOptions> map = SessionOptionsFromMap({});
  ASSERT_TRUE(map.ok()) << map.status();
  const absl::StatusOr<WorkerOptions> flags = WorkerOptionsFromFlags();
  ASSERT_TRUE(flags.ok()) << flags.status();
  ExpectSameSession(*map, *flags);
}

// A value for every option, not its default, given as text both ways.
TEST(SessionOptionMapTest, TheSameValuesMakeTheSameOptionsAsTheFlags) {
  const std::map<std::string, std::string> text = {
      {"advertise_host", "node7"},
      {"auth", "none"},
      {"batch_size", "7"},
      {"bind", "tcp://127.0.0.1:*"},
      {"bucket_bytes", "65536"},
      {"compute_slowdown", "2.5"},
      {"connections_per_peer", "2"},
      {"dense_below", "100"},
      {"density_warmup_epochs", "1.5"},
      {"dump_params", "/tmp/params.bin"},
      {"early_pulls", "false"},  // with overlap: not with the binary's models
      {"early_pulls_in_flight", "4"},
      {"emulate_ms_per_sample", "0.25"},
      {"epochs", "3"},
      {"error_feedback", "false"},
      {"eval_every", "10"},
      {"heartbeat_ms", "500"},
      {"io_threads", "3"},
      {"keys_dir", "/no/keys"},  // ignored without curve
      {"log_every", "5"},
      {"lookahead", "false"},
      {"lr", "0.05"},
      {"max_steps", "100"},
      {"metrics", "/tmp/metrics.jsonl"},
      {"momentum", "0.5"},
      {"momentum_correction", "0.5"},
      {"overlap", "true"},
      {"overlap_pulls", "false"},
      {"pull_codec", "fp16"},
      {"push_codec", "topk:0.1,fp16"},
      {"rank", "3"},
      {"register_wait_s", "30"},
      {"request_timeout_s", "30"},
      {"scheduler", "tcp://10.0.0.1:9000"},
      {"scheduler_timeout_s", "4.5"},
      {"seed", "42"},
      {"timeline", "/tmp/timeline.json"},
      {"weight_decay", "0.0001"},
  };
  std::vector<std::string> given;
  for (const auto& [name, value] : text) given.push_back(name);
  ASSERT_EQ(given, SessionOptionNames()) << "a value here for every option";

  Values values;
  for (const auto& [name, value] : text) values[name] = value;
  gflags::FlagSaver restore;
  SetFlags(text);
  const absl::StatusOr<WorkerOptions> flags = WorkerOptionsFromFlags();
  ASSERT_TRUE(flags.ok()) << flags.status();
  const absl::StatusOr<SessionOptions> map = SessionOptionsFromMap(values);
  ASSERT_TRUE(map.ok()) << map.status();
  ExpectSameSession(*map, *flags);
  EXPECT_EQ(map->batch_size, 7);
  EXPECT_EQ(map->rank, 3);
  EXPECT_EQ(map->ps.push_codec.codec, proto::TOPK);
  EXPECT_EQ(map->connection.heartbeat_period, absl::Milliseconds(500));
}

TEST(SessionOptionMapTest, EachTypeTakesItsValuesAndText) {
  absl::StatusOr<SessionOptions> o = SessionOptionsFromMap({
      {"batch_size", int64_t{32}},
      {"max_steps", std::string("1000")},
      {"epochs", 2.0},  // a double without a fraction
      {"overlap", true},
      {"overlap_pulls", std::string("0")},
      {"lookahead", std::string("false")},
      {"error_feedback", std::string("1")},
      {"lr", 0.25},
      {"momentum", std::string("0.5")},
      {"compute_slowdown", int64_t{3}},  // an integer for a number
      {"seed", std::string("18446744073709551615")},
      {"push_codec", std::string("fp16")},
  });
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->batch_size, 32);
  EXPECT_EQ(o->loop.max_steps, 1000);
  EXPECT_EQ(o->loop.epochs, 2);
  EXPECT_TRUE(o->exchange.overlap);
  EXPECT_FALSE(o->exchange.overlap_pulls);
  EXPECT_FALSE(o->exchange.lookahead);
  EXPECT_TRUE(o->ps.error_feedback);
  EXPECT_EQ(o->exchange.elastic.sgd.learning_rate, 0.25f);
  EXPECT_EQ(o->exchange.elastic.sgd.momentum, 0.5f);
  EXPECT_EQ(o->loop.compute_slowdown, 3.0);
  EXPECT_EQ(o->seed, 18446744073709551615u);
  EXPECT_EQ(o->ps.push_codec.codec, proto::FP16);
}

TEST(SessionOptionMapTest, ErrorsNameTheOption) {
  EXPECT_EQ(ErrorOf({{"bogus", int64_t{1}}}), "unknown worker option 'bogus'");
  EXPECT_EQ(ErrorOf({{"data", std::string("mnist")}}),
            "option 'data' belongs to the C++ worker's own model (the worker binary's --data), "
            "not to a worker whose model is the caller's");
  EXPECT_EQ(ErrorOf({{"model", std::string("mlp")}}),
            "option 'model' belongs to the C++ worker's own model (the worker binary's --model), "
            "not to a worker whose model is the caller's");
  EXPECT_EQ(ErrorOf({{"register_timeout_s", int64_t{5}}}),
            "option 'register_timeout_s' is the worker binary's deprecated alias of "
            "register_wait_s: use register_wait_s");
  // Types.
  EXPECT_EQ(ErrorOf({{"batch_size", std::string("abc")}}),
            "option 'batch_size' takes an integer, got 'abc'");
  EXPECT_EQ(ErrorOf({{"batch_size", true}}), "option 'batch_size' takes an integer, got true");
  EXPECT_EQ(ErrorOf({{"batch_size", 1.5}}), "option 'batch_size' takes an integer, got 1.5");
  EXPECT_EQ(ErrorOf({{"lr", true}}), "option 'lr' takes a number, got true");
  EXPECT_EQ(ErrorOf({{"lr", std::string("fast")}}), "option 'lr' takes a number, got 'fast'");
  EXPECT_EQ(ErrorOf({{"overlap", int64_t{1}}}), "option 'overlap' takes a boolean, got 1");
  EXPECT_EQ(ErrorOf({{"overlap", std::string("maybe")}}),
            "option 'overlap' takes a boolean, got 'maybe'");
  EXPECT_EQ(ErrorOf({{"push_codec", int64_t{16}}}), "option 'push_codec' takes a string, got 16");
  // Ranges.
  EXPECT_EQ(ErrorOf({{"batch_size", int64_t{1} << 40}}),
            "option 'batch_size' takes an integer in [-2147483648, 2147483647], got "
            "1099511627776");
  EXPECT_EQ(ErrorOf({{"batch_size", 1e10}}),
            "option 'batch_size' takes an integer in [-2147483648, 2147483647], got 1e+10");
  EXPECT_EQ(ErrorOf({{"seed", int64_t{-1}}}),
            "option 'seed' takes an integer in [0, 18446744073709551615], got -1");
  EXPECT_EQ(ErrorOf({{"rank", int64_t{-2}}}),
            "--rank (SessionOptions.rank) must be >= -1 (-1: the scheduler chooses), got -2");
  EXPECT_EQ(ErrorOf({{"max_steps", std::string("9223372036854775808")}}),
            "option 'max_steps' takes an integer in [-9223372036854775808, "
            "9223372036854775807], got '9223372036854775808'");
  // What the option's own text must be.
  EXPECT_EQ(ErrorOf({{"push_codec", std::string("zip")}}),
            codec::ParseCodecSpec("push_codec", "zip").status().message());
  EXPECT_EQ(ErrorOf({{"pull_codec", std::string("topk:0.1")}}),
            "--pull_codec must be fp32, fp16 or fp16_delta; got 'topk:0.1'");
  EXPECT_EQ(ErrorOf({{"auth", std::string("kerberos")}}),
            "--auth (AuthOptions.auth) must be none or curve, got 'kerberos'");
}

// The options are validated as the binary's are: the same check, the same words, the struct
// named as the one validated.
TEST(SessionOptionMapTest, ValidateRefusesWhatTheBinaryRefuses) {
  EXPECT_EQ(ErrorOf({{"batch_size", int64_t{0}}}),
            "--batch_size (SessionOptions.batch_size) must be in [1, 65536], got 0");
  gflags::FlagSaver restore;
  SetFlags({{"batch_size", "0"}});
  EXPECT_EQ(WorkerOptionsFromFlags().status().message(),
            "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 0");
  EXPECT_EQ(ErrorOf({{"heartbeat_ms", int64_t{5}}}),
            "--heartbeat_ms (NodeConnectionOptions.heartbeat_period) must be >= 10ms, got 5ms");
  EXPECT_EQ(ErrorOf({{"overlap", true}, {"early_pulls", true}}),
            "--early_pulls (SessionOptions.exchange.early_pulls) does not go with --overlap "
            "(backward still reads the parameters while --overlap pushes) unless the compute "
            "reads a copy of them (the Python client's CUDA models)");
}

// auth=curve loads the worker's keys from keys_dir, as --auth=curve --keys_dir do.
TEST(SessionOptionMapTest, CurveLoadsTheWorkersKeysAsTheFlagsDo) {
  unsetenv("R2SP_KEYS_DIR");
  const std::string dir = ::testing::TempDir() + "/session_option_map_keys";
  std::system(("rm -rf '" + dir + "'").c_str());
  ASSERT_TRUE(WriteJobKeys(dir, /*force=*/false).ok());
  const absl::StatusOr<SessionOptions> map =
      SessionOptionsFromMap({{"auth", std::string("curve")}, {"keys_dir", dir}});
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_NE(map->connection.curve, nullptr);
  EXPECT_EQ(map->connection.curve->role, proto::WORKER);
  EXPECT_EQ(map->connection.curve->public_key, LoadJobKeys(dir, proto::WORKER)->public_key);
  gflags::FlagSaver restore;
  SetFlags({{"auth", "curve"}, {"keys_dir", dir}});
  const absl::StatusOr<WorkerOptions> flags = WorkerOptionsFromFlags();
  ASSERT_TRUE(flags.ok()) << flags.status();
  ExpectSameSession(*map, *flags);

  EXPECT_EQ(ErrorOf({{"auth", std::string("curve")}}),
            "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
  EXPECT_NE(ErrorOf({{"auth", std::string("curve")}, {"keys_dir", dir + "/none"}}), "");
}

}  // namespace
}  // namespace r2sp
