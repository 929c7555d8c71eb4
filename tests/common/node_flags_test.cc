// The node flags are defined in both server/main.cc and worker/worker_flags.cc (the worker's
// flags, shared by its binary and the Python client; common/node_flags.h reads them): the two blocks must stay the same text,
// so both binaries take the same flags with the same defaults and help.
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

// The lines from "// Start of the node flags." to "// End of the node flags", or "".
std::string NodeFlagBlock(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t start = s.find("// Start of the node flags.");
  const size_t end = s.find("// End of the node flags");
  if (start == std::string::npos || end == std::string::npos || end < start) return "";
  return s.substr(start, end - start);
}

TEST(NodeFlagsTest, TheServerAndTheWorkerDefineTheSameNodeFlags) {
  const std::string server = NodeFlagBlock("server/main.cc");
  const std::string worker = NodeFlagBlock("worker/worker_flags.cc");
  ASSERT_NE(server, "");
  EXPECT_EQ(server, worker);
  for (const char* flag :
       {"DEFINE_string(scheduler,", "DEFINE_string(bind,", "DEFINE_string(advertise_host,",
        "DEFINE_int32(heartbeat_ms,", "DEFINE_int32(register_wait_s, 60,",
        "DEFINE_int32(register_timeout_s, 60,", "DEFINE_int32(io_threads,",
        "DEFINE_int32(connections_per_peer,", "DEFINE_double(scheduler_timeout_s, 9,",
        "DEFINE_string(auth, \"none\",", "DEFINE_string(keys_dir,"}) {
    EXPECT_NE(server.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace r2sp
