// The setting of the PsClient and BucketPusher tests: one real ServerHandler holding a 10-float
// model in partitions of 4, 3 and 3 floats (offsets 0, 4, 7) behind the in-process network,
// plain SGD with each push one whole step, and a PsClient of worker 0 talking to it.
#ifndef R2SP_TESTS_WORKER_ONE_SERVER_H_
#define R2SP_TESTS_WORKER_ONE_SERVER_H_

#include <memory>
#include <vector>

#include "common/codec/codec_spec.h"
#include "common/model_layout.h"
#include "server/server_handler.h"
#include "tests/testing/in_process_network.h"
#include "worker/ps_client.h"

namespace r2sp::testing {

class OneServer {
 public:
  OneServer(proto::SyncMode sync, float learning_rate,
            const codec::CodecSpec& push_codec = codec::CodecSpec());

  const ModelLayout& layout() const { return layout_; }
  ServerHandler& server() { return *server_; }
  PsClient& ps() { return *ps_; }
  InProcessNetwork& network() { return network_; }
  // The whole model as the server holds it, partition after partition.
  std::vector<float> Weights() const;

 private:
  const ModelLayout layout_;
  std::unique_ptr<ServerHandler> server_;
  std::unique_ptr<PsClient> ps_;
  InProcessNetwork network_;  // last: stops before the handler it calls goes
};

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_WORKER_ONE_SERVER_H_
