// fp16-delta pulls (proto FP16_DELTA) of one partition: per worker, the fp32 copy of the
// partition that worker holds, as it rebuilds it from the deltas it was sent. A pull answers
// with the weights minus that copy in binary16 and adds the rounded deltas to the copy
// (common/codec/fp16_delta.h), so nothing rounding drops is lost, only sent later. A worker
// whose copy the server does not have at the base it names (its first such pull, a pull of
// another codec in between, a lost reply, a restarted server) gets the whole weights in fp32,
// and the copy starts again from them. Memory: one fp32 copy per worker that pulls this way.
#ifndef R2SP_SERVER_PULL_SHADOWS_H_
#define R2SP_SERVER_PULL_SHADOWS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/messages.pb.h"
#include "zmq.hpp"

namespace r2sp {

// Thread-safety: one thread (the server's I/O thread).
class PullShadows {
 public:
  PullShadows(size_t num_elements, int num_workers);

  struct Reply {
    proto::Codec codec;  // FP16_DELTA, or FP32 for the whole weights
    zmq::message_t frame;
    uint64_t seq;  // PullReply.delta_seq
  };
  // The reply to worker `rank`'s FP16_DELTA pull with PullInfo.delta_base `base`, where
  // `weights` is the fp32 frame an FP32 pull would get (current or predicted weights), sent
  // as it is when the worker gets the whole weights.
  // REQUIRES: 0 <= rank < num_workers; weights holds num_elements floats.
  Reply Answer(int rank, uint64_t base, zmq::message_t weights);

  // The fp32 copies kept (for the server's memory accounting and tests).
  size_t bytes() const;

 private:
  struct Shadow {
    uint64_t seq = 0;  // 0: no copy
    std::vector<float> values;
  };
  const size_t num_elements_;
  std::vector<Shadow> shadows_;  // by worker rank
};

}  // namespace r2sp

#endif  // R2SP_SERVER_PULL_SHADOWS_H_
