// The tests' JSON reader: nested objects and arrays, exact numbers, strings with escapes, and
// errors that say where.
#include "tests/testing/json.h"

#include "gtest/gtest.h"

namespace r2sp::testing {
namespace {

TEST(JsonTest, ReadsNestedObjectsAndArrays) {
  absl::StatusOr<Json> json = ParseJson(
      R"( {"iterations": 40, "loss": -1.5e-3, "ok": true, "none": null,
           "workers": [{"rank": 0, "model": "mlp"}, {"rank": 1, "tags": []}], "empty": {}} )");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["iterations"].number, 40);
  EXPECT_NE((*json)["iterations"].number, 4);
  EXPECT_DOUBLE_EQ((*json)["loss"].number, -0.0015);
  EXPECT_TRUE((*json)["ok"].boolean);
  EXPECT_TRUE((*json)["none"].is_null());
  EXPECT_TRUE(json->Has("none"));
  EXPECT_FALSE(json->Has("absent"));
  EXPECT_TRUE((*json)["absent"].is_null());
  ASSERT_EQ((*json)["workers"].array.size(), 2u);
  EXPECT_EQ((*json)["workers"][0]["model"].string, "mlp");
  EXPECT_EQ((*json)["workers"][1]["rank"].number, 1);
  EXPECT_EQ((*json)["workers"][1]["tags"].type, Json::Type::kArray);
  EXPECT_TRUE((*json)["workers"][2].is_null());
  EXPECT_EQ((*json)["empty"].type, Json::Type::kObject);
  EXPECT_EQ(json->object.front().first, "iterations");  // the file's order
}

TEST(JsonTest, ReadsEscapes) {
  absl::StatusOr<Json> json = ParseJson(R"("a\"b\\c\nd\u0041")");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->string, "a\"b\\c\ndA");
}

TEST(JsonTest, ErrorsSayWhere) {
  EXPECT_EQ(ParseJson(R"({"a": 1,})").status(),
            absl::InvalidArgumentError("bad JSON at offset 8: expected a key"));
  EXPECT_EQ(ParseJson("[1 2]").status(),
            absl::InvalidArgumentError("bad JSON at offset 3: expected ',' or ']'"));
  EXPECT_EQ(ParseJson("{} x").status(),
            absl::InvalidArgumentError("bad JSON at offset 3: text after the value"));
  EXPECT_EQ(ParseJson(R"("open)").status(),
            absl::InvalidArgumentError("bad JSON at offset 5: unterminated string"));
}

TEST(JsonTest, ReadsJsonLines) {
  absl::StatusOr<std::vector<Json>> lines = ParseJsonLines("{\"step\": 3}\n\n{\"step\": 6}\n");
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1]["step"].number, 6);
  EXPECT_EQ(ParseJsonLines("{}\n{").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace r2sp::testing
