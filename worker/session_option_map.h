// SessionOptions from a map of option values, for callers without a command line (the Python
// client): each option has the name, meaning and default of the worker binary's flag of that
// name (--batch_size, --push_codec, --scheduler, ...), and the result is what the binary would
// build from those flags, validated as the binary validates it. The model's and its data's
// flags (--model, --data, --device, ...) have no option here: they belong to the binary's own
// model, and are refused by name.
//
// Thread-safety: the functions are thread-safe; they read only constant tables.
#ifndef R2SP_WORKER_SESSION_OPTION_MAP_H_
#define R2SP_WORKER_SESSION_OPTION_MAP_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/messages.pb.h"
#include "worker/session_options.h"

namespace r2sp {

// One option's value. A string is read as the command line reads the flag's text ("true",
// "false", "1", "0" for a boolean; "64", "0.5"); an integer also stands for a number (double)
// option; a double without a fraction for an integer option. Anything else of the wrong type,
// or an integer out of the option's range, is refused.
using OptionValue = std::variant<bool, int64_t, double, std::string>;

// The worker binary's flag defaults, overridden by `values`, as SessionOptions (the
// connection's keys loaded for auth=curve), validated by SessionOptions::Validate(). Else
// InvalidArgument naming the option: "unknown worker option 'x'", "option 'batch_size' takes
// an integer, got 'abc'", "option 'data' belongs to the C++ worker's own model ...", the
// parse error of a codec, or the first Validate() error.
absl::StatusOr<SessionOptions> SessionOptionsFromMap(
    const std::map<std::string, OptionValue>& values);
// The same over `base`: the fields no option sets (the caller's model: external_model, model,
// exchange.params_staged) are base's; every option's field is its default or its value.
absl::StatusOr<SessionOptions> SessionOptionsFromMap(
    const std::map<std::string, OptionValue>& values, const SessionOptions& base);

// Every option's name, sorted.
std::vector<std::string> SessionOptionNames();
// The worker binary's flags about its own model and data, which have no option here (a caller
// whose model is its own leaves them out), sorted.
std::vector<std::string> ModelOptionNames();
// An option's default as the worker binary's --help shows its flag's: "true"/"false",
// integers in decimal, numbers with 17 significant digits (printf's %.17g), strings as they
// are. NotFound for a name SessionOptionNames() does not hold.
absl::StatusOr<std::string> SessionOptionDefault(absl::string_view name);
// The type of an option's values, as the flag's: bool, int32, int64, uint64, double or string.
// NotFound for a name SessionOptionNames() does not hold.
absl::StatusOr<std::string> SessionOptionType(absl::string_view name);

// --pull_codec's text: fp32, fp16 or fp16_delta, any case; else InvalidArgument.
absl::StatusOr<proto::Codec> ParsePullCodec(const std::string& text);

}  // namespace r2sp

#endif  // R2SP_WORKER_SESSION_OPTION_MAP_H_
