// A flat gradient in host memory as a workload hands it to the pushes: fp32 values, or binary16
// values a device encoded before copying them out (models::Network::set_fp16_gradients), which
// PsClient sends as they are with the fp16 push codec (half the bytes over the device's bus,
// and no encoding on the host).
#ifndef R2SP_WORKER_HOST_GRADIENT_H_
#define R2SP_WORKER_HOST_GRADIENT_H_

#include <cstdint>

namespace r2sp {

// A borrowed view; exactly one of the two arrays is set (or neither, for no gradient).
struct HostGradient {
  HostGradient() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): an fp32 array is the common case.
  HostGradient(const float* values) : fp32(values) {}
  static HostGradient Fp16(const uint16_t* values) {
    HostGradient g;
    g.fp16 = values;
    return g;
  }

  // The view from value `offset` on.
  HostGradient At(int64_t offset) const {
    HostGradient g;
    if (fp32 != nullptr) g.fp32 = fp32 + offset;
    if (fp16 != nullptr) g.fp16 = fp16 + offset;
    return g;
  }
  bool operator==(const HostGradient& o) const { return fp32 == o.fp32 && fp16 == o.fp16; }

  const float* fp32 = nullptr;
  const uint16_t* fp16 = nullptr;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_HOST_GRADIENT_H_
