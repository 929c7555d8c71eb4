// tools/bench/shaped_loopback: rates parsed as netcluster takes them, bad ones refused, and a
// shaped loopback really holds a transfer to its rate (in a forked child, whose namespace goes
// with it; skipped without root or iproute2).
#include "tools/bench/shaped_loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::bench {
namespace {

TEST(ShapedLoopbackTest, ParsesRatesInTcUnits) {
  EXPECT_EQ(*ParseLinkRate("419mbit"), 419000000u);
  EXPECT_EQ(*ParseLinkRate("1gbit"), 1000000000u);
  EXPECT_EQ(*ParseLinkRate("2.5Gbit"), 2500000000u);
  EXPECT_EQ(*ParseLinkRate("800kbit"), 800000u);
}

TEST(ShapedLoopbackTest, RefusesMalformedRates) {
  for (const char* bad : {"", "mbit", "419", "419mb", "-5mbit", "0mbit", "1e3mbit", "0.5kbit",
                          "5000gbit", "1mbit; reboot", " 1mbit", "nanmbit", "infgbit"}) {
    const absl::StatusOr<uint64_t> rate = ParseLinkRate(bad);
    EXPECT_EQ(rate.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(ShapedLoopbackTest, BucketHoldsFourMillisecondsAndOneSegment) {
  EXPECT_EQ(LinkBurstBytes(1000000), 128u * 1024);        // 1 Mbit/s: the 64 KiB segment floor
  EXPECT_EQ(LinkBurstBytes(8000000000), 4000000u);        // 8 Gbit/s: 4 ms of traffic
}

// In the child: enters a loopback shaped to 20 Mbit/s and times 1 MB over TCP through it.
// Exits 0 when that took at least 80% of the link's 0.42 s, 3 when faster, 2 on a socket error.
int ChildTimesTransfer() {
  if (!EnterShapedLoopback(20000000).ok()) return 1;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 2;
  }
  constexpr size_t kBytes = 1000 * 1000;
  size_t received = 0;
  std::thread reader([&] {
    const int conn = accept(listener, nullptr, nullptr);
    char buf[65536];
    ssize_t n;
    while (conn >= 0 && (n = read(conn, buf, sizeof(buf))) > 0) received += n;
    if (conn >= 0) close(conn);
  });
  const auto start = std::chrono::steady_clock::now();
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  bool ok = connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  std::vector<char> payload(kBytes, 'x');
  for (size_t sent = 0; ok && sent < kBytes;) {
    const ssize_t n = write(sender, payload.data() + sent, kBytes - sent);
    ok = n > 0;
    sent += ok ? n : 0;
  }
  shutdown(sender, SHUT_WR);
  reader.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ok || received != kBytes) return 2;
  return seconds >= 0.8 * kBytes * 8 / 20e6 ? 0 : 3;
}

TEST(ShapedLoopbackTest, HoldsATransferToTheRate) {
  if (geteuid() != 0) GTEST_SKIP() << "a shaped loopback needs root";
  if (std::system("command -v tc >/dev/null && command -v ip >/dev/null") != 0) {
    GTEST_SKIP() << "iproute2 (ip, tc) is not installed";
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(ChildTimesTransfer());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: could not shape the loopback; 2: the transfer failed; 3: it beat the link's rate";
}

}  // namespace
}  // namespace r2sp::bench
