// OptionChecker: how the libraries' options structs say what is wrong with them. Each
// Validate() runs its checks through one, which keeps the first failure as
// InvalidArgument("FLAG (STRUCT.FIELD) must be REQUIREMENT, got VALUE"), naming both the flag a
// user types and the field a test or benchmark sets.
#ifndef R2SP_COMMON_OPTION_CHECKER_H_
#define R2SP_COMMON_OPTION_CHECKER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace r2sp {

// How a value appears after "got": numbers as StrCat writes them, durations as
// absl::FormatDuration, strings quoted, booleans as true/false.
std::string OptionValueText(absl::string_view value);
std::string OptionValueText(const std::string& value);
std::string OptionValueText(const char* value);
std::string OptionValueText(bool value);
std::string OptionValueText(absl::Duration value);
template <typename T>
std::string OptionValueText(T value) {
  return absl::StrCat(value);
}

// Not thread-safe; one per Validate() call.
class OptionChecker {
 public:
  // `struct_name`: e.g. "WorkerOptions".
  explicit OptionChecker(absl::string_view struct_name) : struct_name_(struct_name) {}

  // Unless `ok` (or an earlier check failed): "FLAG (STRUCT.FIELD) must be MUST, got GOT".
  template <typename T>
  void Check(bool ok, absl::string_view flag, absl::string_view field, absl::string_view must,
             const T& got) {
    if (!ok && status_.ok()) Fail(flag, field, must, OptionValueText(got));
  }
  // Unless `ok`: "FLAG (STRUCT.FIELD) WHY" (WHY says the rest, e.g. "needs --checkpoint_dir").
  void Require(bool ok, absl::string_view flag, absl::string_view field, absl::string_view why);
  // A nested struct's error (its own Validate()), unless one was found already.
  void Merge(const absl::Status& nested);

  // OK, or the first failure.
  const absl::Status& status() const { return status_; }

 private:
  void Fail(absl::string_view flag, absl::string_view field, absl::string_view must,
            const std::string& got);

  const std::string struct_name_;
  absl::Status status_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_OPTION_CHECKER_H_
