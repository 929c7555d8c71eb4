// See one_server.h.
#include "tests/worker/one_server.h"

#include <string>

#include "absl/time/time.h"

namespace r2sp::testing {
namespace {

ModelLayout TenFloats() {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(10);
  return *ModelLayout::Create({t}, /*partition_bytes=*/16, /*num_servers=*/1);
}

}  // namespace

OneServer::OneServer(proto::SyncMode sync, float learning_rate,
                     const codec::CodecSpec& push_codec)
    : layout_(TenFloats()) {
  ServerOptions options;
  options.sync = sync;
  options.sgd = {learning_rate, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
  options.per_sample_updates = false;  // each push one whole SGD step
  server_ = std::make_unique<ServerHandler>(options);
  server_->Configure(/*rank=*/0, ServerPeers{"scheduler", {"worker0"}}, layout_);
  network_.Serve("server0", server_.get());
  PsClientOptions ps_options;
  ps_options.request_timeout = absl::Seconds(10);
  ps_options.push_codec = push_codec;
  ps_ = std::make_unique<PsClient>(network_.Client("worker0"), &layout_,
                                   std::vector<std::string>{"server0"}, ps_options);
}

std::vector<float> OneServer::Weights() const {
  std::vector<float> all;
  for (const Partition& p : layout_.partitions()) {
    const std::vector<float> w = *server_->Weights(p.key);
    all.insert(all.end(), w.begin(), w.end());
  }
  return all;
}

}  // namespace r2sp::testing
