// AuthOptions and LoadAuthKeys: none gives no keys; an unknown mode and curve without a
// directory are InvalidArgument with their exact messages.
#include "common/auth/auth_options.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(AuthOptionsTest, NoneGivesNoKeys) {
  const absl::StatusOr<std::shared_ptr<const JobKeys>> keys =
      LoadAuthKeys(AuthOptions(), proto::WORKER);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, nullptr);
}

TEST(AuthOptionsTest, AnUnknownModeIsInvalid) {
  AuthOptions options;
  options.auth = "tls";
  EXPECT_EQ(options.Validate().message(), "--auth (AuthOptions.auth) must be none or curve, got 'tls'");
  const absl::Status status = LoadAuthKeys(options, proto::SERVER).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--auth (AuthOptions.auth) must be none or curve, got 'tls'");
}

TEST(AuthOptionsTest, CurveNeedsADirectory) {
  unsetenv("R2SP_KEYS_DIR");
  AuthOptions options;
  options.auth = "curve";
  const absl::Status status = LoadAuthKeys(options, proto::SCHEDULER).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
}

TEST(AuthOptionsTest, AMissingDirectoryIsInvalidArgument) {
  AuthOptions options;
  options.auth = "curve";
  options.keys_dir = "/nonexistent-r2sp-keys";
  const absl::Status status = LoadAuthKeys(options, proto::WORKER).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("/nonexistent-r2sp-keys"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace r2sp
