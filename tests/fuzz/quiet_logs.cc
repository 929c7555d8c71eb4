// Every fuzz target's LLVMFuzzerInitialize: glog and protobuf keep quiet except for fatal
// errors, since a rejected input is logged as a warning and logging would set the pace of the
// run. A CHECK failure still prints. R2SP_FUZZ_LOGS=1 keeps every log (to follow one input).
#include <cstdint>
#include <cstdlib>

#include "glog/logging.h"
#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (std::getenv("R2SP_FUZZ_LOGS") != nullptr) return 0;
  FLAGS_minloglevel = google::GLOG_FATAL;
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
