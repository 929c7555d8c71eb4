// See zap_handler.h.
#include "common/auth/zap_handler.h"

#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log_limiter.h"
#include "glog/logging.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr int kPollMs = 100;  // how often the thread looks at stop_

}  // namespace

absl::StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& context,
                                                                const JobKeys& keys) {
  std::unique_ptr<ZapHandler> zap(new ZapHandler(context, keys));
  try {
    zap->socket_.set(zmq::sockopt::linger, 0);
    zap->socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return absl::InternalError(absl::StrCat("cannot start the ZAP handler: ", e.what()));
  }
  zap->thread_ = std::thread([z = zap.get()] { z->Loop(); });
  return zap;
}

ZapHandler::ZapHandler(zmq::context_t& context, const JobKeys& keys)
    : socket_(context, zmq::socket_type::rep) {
  for (const auto& [role, z85] : keys.public_keys) {
    absl::StatusOr<std::string> binary = DecodeZ85Key(z85);
    CHECK(binary.ok()) << "LoadJobKeys returned a malformed key";
    allowed_[*binary] = KeyRoleName(static_cast<proto::Role>(role));
  }
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  socket_.close();
}

std::pair<std::string, std::string> ZapHandler::Decide(
    const std::vector<zmq::message_t>& request) {
  // version, request id, domain, address, routing id, mechanism, credentials...
  if (request.size() < 6 || request[0].to_string_view() != "1.0") return {"500", ""};
  if (request[5].to_string_view() != "CURVE" || request.size() != 7) return {"400", ""};
  auto it = allowed_.find(request[6].to_string());
  if (it == allowed_.end()) return {"400", ""};
  return {"200", it->second};
}

void ZapHandler::Loop() {
  LogLimiter limiter;
  std::vector<zmq::message_t> request;
  while (!stop_.load()) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) <= 0) continue;
      request.clear();
      if (!zmq::recv_multipart(socket_, std::back_inserter(request))) continue;
      auto [code, user] = Decide(request);
      if (code == "200") {
        accepted_.fetch_add(1);
      } else {
        refused_.fetch_add(1);
        int64_t suppressed = 0;
        if (limiter.ShouldLog(absl::Now(), &suppressed)) {
          LOG(WARNING) << "refused a connection from "
                       << (request.size() > 3 ? request[3].to_string() : std::string("?"))
                       << ": " << (request.size() > 5 ? request[5].to_string() : std::string())
                       << (code == "400" ? " peer without one of the job's CURVE keys"
                                         : " malformed ZAP request")
                       << " (" << suppressed << " more refused since the last report)";
        }
      }
      const std::string text = code == "200" ? "OK" : "refused";
      std::vector<zmq::const_buffer> reply = {
          zmq::str_buffer("1.0"),
          zmq::buffer(request.size() > 1 ? request[1].data() : nullptr,
                      request.size() > 1 ? request[1].size() : 0),
          zmq::buffer(code),
          zmq::buffer(text),
          zmq::buffer(user),
          zmq::str_buffer("")};
      zmq::send_multipart(socket_, reply);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      LOG(WARNING) << "ZAP handler: " << e.what();
    }
  }
}

}  // namespace r2sp
