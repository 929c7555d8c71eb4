// See option_checker.h.
#include "common/option_checker.h"

namespace r2sp {

std::string OptionValueText(absl::string_view value) { return absl::StrCat("'", value, "'"); }
std::string OptionValueText(const std::string& value) {
  return OptionValueText(absl::string_view(value));
}
std::string OptionValueText(const char* value) { return OptionValueText(absl::string_view(value)); }
std::string OptionValueText(bool value) { return value ? "true" : "false"; }
std::string OptionValueText(absl::Duration value) { return absl::FormatDuration(value); }

void OptionChecker::Require(bool ok, absl::string_view flag, absl::string_view field,
                            absl::string_view why) {
  if (ok || !status_.ok()) return;
  status_ = absl::InvalidArgumentError(
      absl::StrCat(flag, " (", struct_name_, ".", field, ") ", why));
}

void OptionChecker::Merge(const absl::Status& nested) {
  if (status_.ok() && !nested.ok()) status_ = nested;
}

void OptionChecker::Fail(absl::string_view flag, absl::string_view field, absl::string_view must,
                         const std::string& got) {
  status_ = absl::InvalidArgumentError(
      absl::StrCat(flag, " (", struct_name_, ".", field, ") must be ", must, ", got ", got));
}

}  // namespace r2sp
