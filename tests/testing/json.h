// A small JSON reader for tests: the stats, summary, report and metrics files the tests check
// are parsed and their fields compared exactly, never matched as substrings (which let
// "iterations": 4 match 40).
#ifndef R2SP_TESTS_TESTING_JSON_H_
#define R2SP_TESTS_TESTING_JSON_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace r2sp::testing {

// One JSON value. Numbers are doubles (the files hold counts well below 2^53).
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in the file's order

  // The member `key` of an object, or a null value when this is not an object or has none.
  const Json& operator[](absl::string_view key) const;
  // Element `i` of an array, or a null value when out of range or not an array.
  const Json& operator[](size_t i) const;
  // Whether this object has the member `key`.
  bool Has(absl::string_view key) const;
  bool is_null() const { return type == Type::kNull; }
};

// Parses a whole document (surrounding white space allowed). InvalidArgument, with the offset,
// on anything else.
absl::StatusOr<Json> ParseJson(absl::string_view text);

// Parses each non-empty line of a JSON-lines file.
absl::StatusOr<std::vector<Json>> ParseJsonLines(absl::string_view text);

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_JSON_H_
