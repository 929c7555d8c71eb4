// See session_option_map.h. The options are a table, one entry per option: its name, its
// type, its default (the worker flag's) and where its value goes. The node options fill
// NodeFlagValues, which become the connection as the node flags do (node_flag_values.h).
#include "worker/session_option_map.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/codec/codec_spec.h"
#include "common/node_flag_values.h"
#include "common/option_checker.h"
#include "common/status_macros.h"

namespace r2sp {
namespace {

// What the options fill: the session's options, and the node's values, from which the
// connection is made once every option is in.
struct Target {
  SessionOptions options;
  NodeFlagValues node;
};

struct Option {
  const char* name;
  const char* type;           // as the flag's: bool, int32, int64, uint64, double, string
  OptionValue default_value;  // the worker flag's
  // Reads `value` as the option's type and sets it in the target.
  std::function<absl::Status(const OptionValue& value, Target& target)> apply;
};

// The worker flags that configure the binary's own model and its data (or what the binary
// does instead of joining a job), which a session does not have.
// clang-format off
constexpr const char* kModelFlags[] = {
    "augment", "compute_ms", "data", "data_dir", "device", "encode_on_device", "eval_only", "gpu",
    "grad", "init", "iterations", "keep_models", "layers", "model", "model_dir", "model_mb",
    "print_codec", "threads", "workers_per_process"};
// clang-format on

std::string ValueText(const OptionValue& value) {
  return std::visit([](const auto& v) { return OptionValueText(v); }, value);
}

absl::Status WrongType(absl::string_view name, absl::string_view takes, const OptionValue& value) {
  return absl::InvalidArgumentError(
      absl::StrCat("option '", name, "' takes ", takes, ", got ", ValueText(value)));
}

template <typename T>
absl::StatusOr<T> Read(absl::string_view name, const OptionValue& value);

template <>
absl::StatusOr<bool> Read<bool>(absl::string_view name, const OptionValue& value) {
  bool b;
  if (const bool* v = std::get_if<bool>(&value)) return *v;
  if (const std::string* s = std::get_if<std::string>(&value); s && absl::SimpleAtob(*s, &b)) {
    return b;
  }
  return WrongType(name, "a boolean", value);
}

template <>
absl::StatusOr<double> Read<double>(absl::string_view name, const OptionValue& value) {
  double d;
  if (const double* v = std::get_if<double>(&value)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&value)) return static_cast<double>(*v);
  if (const std::string* s = std::get_if<std::string>(&value); s && absl::SimpleAtod(*s, &d)) {
    return d;
  }
  return WrongType(name, "a number", value);
}

template <>
absl::StatusOr<std::string> Read<std::string>(absl::string_view name, const OptionValue& value) {
  if (const std::string* v = std::get_if<std::string>(&value)) return *v;
  return WrongType(name, "a string", value);
}

// int32_t, int64_t, uint64_t: through int128, which holds all of them, so that the range check
// sees the value as given.
template <typename T>
absl::StatusOr<T> ReadInteger(absl::string_view name, const OptionValue& value) {
  const absl::int128 lo = std::numeric_limits<T>::min();
  const absl::int128 hi = std::numeric_limits<T>::max();
  auto out_of_range = [&] {
    return WrongType(name,
                     absl::StrCat("an integer in [", std::numeric_limits<T>::min(), ", ",
                                  std::numeric_limits<T>::max(), "]"),
                     value);
  };
  absl::int128 n;
  if (const int64_t* v = std::get_if<int64_t>(&value)) {
    n = *v;
  } else if (const double* v = std::get_if<double>(&value)) {
    if (!std::isfinite(*v) || std::trunc(*v) != *v) return WrongType(name, "an integer", value);
    if (*v < static_cast<double>(lo) || *v > static_cast<double>(hi)) return out_of_range();
    n = absl::int128(*v);
  } else if (const std::string* s = std::get_if<std::string>(&value)) {
    if (!absl::SimpleAtoi(*s, &n)) return WrongType(name, "an integer", value);
  } else {
    return WrongType(name, "an integer", value);
  }
  if (n < lo || n > hi) return out_of_range();
  return static_cast<T>(n);
}

template <>
absl::StatusOr<int32_t> Read<int32_t>(absl::string_view name, const OptionValue& value) {
  return ReadInteger<int32_t>(name, value);
}
template <>
absl::StatusOr<int64_t> Read<int64_t>(absl::string_view name, const OptionValue& value) {
  return ReadInteger<int64_t>(name, value);
}
template <>
absl::StatusOr<uint64_t> Read<uint64_t>(absl::string_view name, const OptionValue& value) {
  return ReadInteger<uint64_t>(name, value);
}

template <typename T>
constexpr const char* TypeName() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return "int32";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return "int64";
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return "uint64";
  } else if constexpr (std::is_same_v<T, double>) {
    return "double";
  } else {
    static_assert(std::is_same_v<T, std::string>);
    return "string";
  }
}

// An option of type T whose value `set` puts in the target; `set` returns void, or the
// Status of what it parses further (a codec's text).
template <typename T, typename Set>
Option Make(const char* name, T default_value, Set set) {
  OptionValue default_as_value;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    default_as_value = static_cast<int64_t>(default_value);
  } else {
    default_as_value = default_value;
  }
  return {name, TypeName<T>(), std::move(default_as_value),
          [name, set](const OptionValue& value, Target& target) -> absl::Status {
            R2SP_ASSIGN_OR_RETURN(T v, Read<T>(name, value));
            if constexpr (std::is_void_v<std::invoke_result_t<Set, T, Target&>>) {
              set(std::move(v), target);
              return absl::OkStatus();
            } else {
              return set(std::move(v), target);
            }
          }};
}

using Str = std::string;

// The connection's options (NodeFlagValues), with common/node_flags.cc's defaults.
std::vector<Option> ConnectionOptions() {
  return {
      Make<Str>("scheduler", "tcp://127.0.0.1:9000",
                [](Str v, Target& t) { t.node.scheduler = v; }),
      Make<Str>("bind", "tcp://0.0.0.0:*", [](Str v, Target& t) { t.node.bind = v; }),
      Make<Str>("advertise_host", "", [](Str v, Target& t) { t.node.advertise_host = v; }),
      Make<int32_t>("heartbeat_ms", 1000, [](int32_t v, Target& t) { t.node.heartbeat_ms = v; }),
      Make<int32_t>("register_wait_s", 60,
                    [](int32_t v, Target& t) { t.node.register_wait_s = v; }),
      Make<int32_t>("io_threads", 0, [](int32_t v, Target& t) { t.node.io_threads = v; }),
      Make<int32_t>("connections_per_peer", 0,
                    [](int32_t v, Target& t) { t.node.connections_per_peer = v; }),
      Make<double>("scheduler_timeout_s", 9,
                   [](double v, Target& t) { t.node.scheduler_timeout_s = v; }),
      Make<Str>("auth", "none", [](Str v, Target& t) { t.node.auth = v; }),
      Make<Str>("keys_dir", "", [](Str v, Target& t) { t.node.keys_dir = v; }),
  };
}

// The options with their flags' defaults (worker/main_flags.cc, common/node_flags.cc): the
// connection's, then the session's.
std::vector<Option> MakeOptions() {
  std::vector<Option> options = ConnectionOptions();
  std::vector<Option> session = {
      // The session's own fields.
      Make<int32_t>("rank", -1, [](int32_t v, Target& t) { t.options.rank = v; }),
      Make<int32_t>("batch_size", 64, [](int32_t v, Target& t) { t.options.batch_size = v; }),
      Make<uint64_t>("seed", 1, [](uint64_t v, Target& t) { t.options.seed = v; }),
      Make<Str>("dump_params", "", [](Str v, Target& t) { t.options.dump_params_path = v; }),
      Make<Str>("metrics", "", [](Str v, Target& t) { t.options.metrics_path = v; }),
      Make<Str>("timeline", "", [](Str v, Target& t) { t.options.timeline_path = v; }),
      Make<int32_t>("log_every", 0, [](int32_t v, Target& t) { t.options.log_every = v; }),
      // The training run (LoopOptions).
      Make<int32_t>("epochs", 1, [](int32_t v, Target& t) { t.options.loop.epochs = v; }),
      Make<int64_t>("max_steps", 0, [](int64_t v, Target& t) { t.options.loop.max_steps = v; }),
      Make<int32_t>("eval_every", 0, [](int32_t v, Target& t) { t.options.loop.eval_every = v; }),
      Make<double>("compute_slowdown", 1,
                   [](double v, Target& t) { t.options.loop.compute_slowdown = v; }),
      Make<double>("emulate_ms_per_sample", 0,
                   [](double v, Target& t) { t.options.loop.emulate_ms_per_sample = v; }),
      // The parameter-server client (PsClientOptions).
      Make<int32_t>("request_timeout_s", 120,
                    [](int32_t v, Target& t) { t.options.ps.request_timeout = absl::Seconds(v); }),
      Make<Str>("push_codec", "fp32",
                [](Str v, Target& t) -> absl::Status {
                  R2SP_ASSIGN_OR_RETURN(t.options.ps.push_codec,
                                        codec::ParseCodecSpec("push_codec", v));
                  return absl::OkStatus();
                }),
      Make<bool>("error_feedback", true,
                 [](bool v, Target& t) { t.options.ps.error_feedback = v; }),
      Make<double>(
          "momentum_correction", 0,
          [](double v, Target& t) { t.options.ps.momentum_correction = static_cast<float>(v); }),
      Make<uint64_t>("dense_below", 16384,
                     [](uint64_t v, Target& t) { t.options.ps.dense_below = v; }),
      // The exchanger (ExchangerOptions).
      Make<bool>("lookahead", true, [](bool v, Target& t) { t.options.exchange.lookahead = v; }),
      Make<Str>("pull_codec", "fp32",
                [](Str v, Target& t) -> absl::Status {
                  R2SP_ASSIGN_OR_RETURN(t.options.exchange.pull_codec, ParsePullCodec(v));
                  return absl::OkStatus();
                }),
      Make<bool>("overlap", false, [](bool v, Target& t) { t.options.exchange.overlap = v; }),
      Make<bool>("overlap_pulls", true,
                 [](bool v, Target& t) { t.options.exchange.overlap_pulls = v; }),
      Make<uint64_t>("bucket_bytes", 4 << 20,
                     [](uint64_t v, Target& t) { t.options.exchange.bucket_bytes = v; }),
      Make<bool>("early_pulls", false,
                 [](bool v, Target& t) { t.options.exchange.early_pulls = v; }),
      Make<int32_t>("early_pulls_in_flight", 0,
                    [](int32_t v, Target& t) { t.options.exchange.early_pulls_in_flight = v; }),
      Make<double>("density_warmup_epochs", 0,
                   [](double v, Target& t) { t.options.exchange.density_warmup_epochs = v; }),
      Make<double>("lr", 0.01,
                   [](double v, Target& t) {
                     t.options.exchange.elastic.sgd.learning_rate = static_cast<float>(v);
                   }),
      Make<double>("momentum", 0.9,
                   [](double v, Target& t) {
                     t.options.exchange.elastic.sgd.momentum = static_cast<float>(v);
                   }),
      Make<double>("weight_decay", 0,
                   [](double v, Target& t) {
                     t.options.exchange.elastic.sgd.weight_decay = static_cast<float>(v);
                   }),
  };
  options.insert(options.end(), std::make_move_iterator(session.begin()),
                 std::make_move_iterator(session.end()));
  return options;
}

const std::vector<Option>& Options() {
  static const std::vector<Option>* const options = new std::vector<Option>(MakeOptions());
  return *options;
}

const Option* Find(absl::string_view name) {
  for (const Option& option : Options()) {
    if (name == option.name) return &option;
  }
  return nullptr;
}

// Why `name` has no option: a model flag, the deprecated alias, or unknown.
absl::Status NoSuchOption(absl::string_view name) {
  if (std::find(std::begin(kModelFlags), std::end(kModelFlags), name) != std::end(kModelFlags)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "option '", name, "' belongs to the C++ worker's own model (the worker binary's --", name,
        "), not to a worker whose model is the caller's"));
  }
  if (name == "register_timeout_s") {
    return absl::InvalidArgumentError(
        "option 'register_timeout_s' is the worker binary's deprecated alias of "
        "register_wait_s: use register_wait_s");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown worker option '", name, "'"));
}

std::string DefaultText(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const double* d = std::get_if<double>(&value)) return absl::StrFormat("%.17g", *d);
  return std::get<std::string>(value);
}

absl::StatusOr<const Option*> Known(absl::string_view name) {
  const Option* option = Find(name);
  if (option == nullptr) {
    return absl::NotFoundError(absl::StrCat("no session option '", name, "'"));
  }
  return option;
}

}  // namespace

absl::StatusOr<SessionOptions> SessionOptionsFromMap(
    const std::map<std::string, OptionValue>& values) {
  return SessionOptionsFromMap(values, SessionOptions());
}

absl::StatusOr<SessionOptions> SessionOptionsFromMap(
    const std::map<std::string, OptionValue>& values, const SessionOptions& base) {
  Target target;
  target.options = base;
  for (const Option& option : Options()) {
    R2SP_RETURN_IF_ERROR(option.apply(option.default_value, target));
  }
  for (const auto& [name, value] : values) {
    const Option* option = Find(name);
    if (option == nullptr) return NoSuchOption(name);
    R2SP_RETURN_IF_ERROR(option->apply(value, target));
  }
  R2SP_ASSIGN_OR_RETURN(target.options.connection,
                        NodeConnectionFromValues(target.node, proto::WORKER));
  R2SP_RETURN_IF_ERROR(target.options.Validate());
  return std::move(target.options);
}

std::vector<std::string> ModelOptionNames() {
  std::vector<std::string> names(std::begin(kModelFlags), std::end(kModelFlags));
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> SessionOptionNames() {
  std::vector<std::string> names;
  for (const Option& option : Options()) names.push_back(option.name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> SessionOptionDefault(absl::string_view name) {
  R2SP_ASSIGN_OR_RETURN(const Option* option, Known(name));
  return DefaultText(option->default_value);
}

absl::StatusOr<std::string> SessionOptionType(absl::string_view name) {
  R2SP_ASSIGN_OR_RETURN(const Option* option, Known(name));
  return std::string(option->type);
}

absl::StatusOr<proto::Codec> ParsePullCodec(const std::string& text) {
  const absl::StatusOr<codec::CodecSpec> pull = codec::ParseCodecSpec("pull_codec", text);
  if (pull.ok() && !pull->sparse()) return pull->codec;
  return absl::InvalidArgumentError("--pull_codec must be fp32, fp16 or fp16_delta; got '" + text +
                                    "'");
}

}  // namespace r2sp
