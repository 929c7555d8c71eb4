// A small JSON reader for tests; see json.h.
#include "tests/testing/json.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace r2sp::testing {
namespace {

const Json& Null() {
  static const Json* const kNull = new Json();
  return *kNull;
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> Document() {
    Json value;
    if (!Value(value)) return Error();
    SkipSpace();
    if (at_ != text_.size()) {
      why_ = "text after the value";
      return Error();
    }
    return value;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("bad JSON at offset ", at_, ": ", why_));
  }
  void SkipSpace() {
    while (at_ < text_.size() && absl::ascii_isspace(text_[at_])) ++at_;
  }
  bool Fail(const char* why) {
    why_ = why;
    return false;
  }
  bool Literal(absl::string_view word) {
    if (text_.substr(at_, word.size()) != word) return Fail("unknown literal");
    at_ += word.size();
    return true;
  }

  bool Value(Json& out) {
    SkipSpace();
    if (at_ >= text_.size()) return Fail("unexpected end");
    const char c = text_[at_];
    if (c == '{') return Object(out);
    if (c == '[') return Array(out);
    if (c == '"') {
      out.type = Json::Type::kString;
      return String(out.string);
    }
    if (c == 't' || c == 'f') {
      out.type = Json::Type::kBool;
      out.boolean = c == 't';
      return Literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') return Literal("null");
    return Number(out);
  }

  bool Number(Json& out) {
    const std::string rest(text_.substr(at_, 64));
    char* end = nullptr;
    out.number = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) return Fail("not a value");
    out.type = Json::Type::kNumber;
    at_ += end - rest.c_str();
    return true;
  }

  bool String(std::string& out) {
    ++at_;  // the opening quote
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) return Fail("unterminated escape");
        const char e = text_[at_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'b':
            c = '\b';
            break;
          case 'f':
            c = '\f';
            break;
          case 'u': {  // the files hold ASCII; keep the code point's low byte
            if (at_ + 4 > text_.size()) return Fail("short \\u escape");
            c = static_cast<char>(
                std::strtol(std::string(text_.substr(at_, 4)).c_str(), nullptr, 16));
            at_ += 4;
            break;
          }
          default:
            c = e;  // \" \\ \/
        }
      }
      out.push_back(c);
    }
    if (at_ >= text_.size()) return Fail("unterminated string");
    ++at_;
    return true;
  }

  bool Array(Json& out) {
    out.type = Json::Type::kArray;
    ++at_;
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == ']') return ++at_, true;
    while (true) {
      out.array.emplace_back();
      if (!Value(out.array.back())) return false;
      SkipSpace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == ']') return ++at_, true;
      return Fail("expected ',' or ']'");
    }
  }

  bool Object(Json& out) {
    out.type = Json::Type::kObject;
    ++at_;
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == '}') return ++at_, true;
    while (true) {
      SkipSpace();
      if (at_ >= text_.size() || text_[at_] != '"') return Fail("expected a key");
      std::string key;
      if (!String(key)) return false;
      SkipSpace();
      if (at_ >= text_.size() || text_[at_] != ':') return Fail("expected ':'");
      ++at_;
      out.object.emplace_back(std::move(key), Json());
      if (!Value(out.object.back().second)) return false;
      SkipSpace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == '}') return ++at_, true;
      return Fail("expected ',' or '}'");
    }
  }

  absl::string_view text_;
  size_t at_ = 0;
  std::string why_;
};

}  // namespace

const Json& Json::operator[](absl::string_view key) const {
  if (type == Type::kObject) {
    for (const auto& [name, value] : object) {
      if (name == key) return value;
    }
  }
  return Null();
}

const Json& Json::operator[](size_t i) const {
  return type == Type::kArray && i < array.size() ? array[i] : Null();
}

bool Json::Has(absl::string_view key) const {
  if (type != Type::kObject) return false;
  for (const auto& member : object) {
    if (member.first == key) return true;
  }
  return false;
}

absl::StatusOr<Json> ParseJson(absl::string_view text) { return Parser(text).Document(); }

absl::StatusOr<std::vector<Json>> ParseJsonLines(absl::string_view text) {
  std::vector<Json> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    absl::StatusOr<Json> value = ParseJson(line);
    if (!value.ok()) return value.status();
    lines.push_back(*std::move(value));
  }
  return lines;
}

}  // namespace r2sp::testing
