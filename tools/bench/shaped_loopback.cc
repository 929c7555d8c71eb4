// See shaped_loopback.h.
#include "tools/bench/shaped_loopback.h"

#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

extern char** environ;

namespace r2sp::bench {
namespace {

// Runs argv (found on PATH) and waits; an error unless it exits 0.
absl::Status Run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (err != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], " (iproute2 installed?): ", std::strerror(err)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", absl::StrJoin(argv, " "), "' failed (status ", status, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> ParseLinkRate(absl::string_view text) {
  static constexpr std::pair<absl::string_view, double> kUnits[] = {
      {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}};
  const std::string lower = absl::AsciiStrToLower(text);
  for (const auto& [unit, scale] : kUnits) {
    if (!absl::EndsWith(lower, unit)) continue;
    double number = 0;
    const absl::string_view digits =
        absl::string_view(lower).substr(0, lower.size() - unit.size());
    if (absl::SimpleAtod(digits, &number) && number > 0 && number * scale >= 1e3 &&
        number * scale <= 1e12 && digits.find_first_not_of("0123456789.") == digits.npos) {
      return static_cast<uint64_t>(number * scale);
    }
    break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "link rate '", text, "': want a number and kbit, mbit or gbit, e.g. 419mbit (1kbit to 1000gbit)"));
}

uint64_t LinkBurstBytes(uint64_t bits_per_second) {
  return std::max<uint64_t>(128 * 1024, bits_per_second / 8 * 4 / 1000);
}

absl::Status EnterShapedLoopback(uint64_t bits) {
  if (unshare(CLONE_NEWNET) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unshare(CLONE_NEWNET): ", std::strerror(errno), " (a shaped link needs root)"));
  }
  R2SP_RETURN_IF_ERROR(Run({"ip", "link", "set", "lo", "up"}));
  // tc's "bit" unit is bits per second; the bucket is in bytes; a 100 ms queue before drops
  // (TCP's congestion control keeps it short).
  return Run({"tc", "qdisc", "replace", "dev", "lo", "root", "tbf", "rate", absl::StrCat(bits, "bit"),
              "burst", absl::StrCat(LinkBurstBytes(bits)), "latency", "100ms"});
}

}  // namespace r2sp::bench
