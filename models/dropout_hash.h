// The dropout mask as a pure function of (seed, step, node, element), shared by the CPU
// backend, the CUDA kernels and the tests' reference, so all produce identical masks. Plain
// C++ that nvcc also compiles for the device.
#ifndef R2SP_MODELS_DROPOUT_HASH_H_
#define R2SP_MODELS_DROPOUT_HASH_H_

#include <cstdint>

#ifdef __CUDACC__
#define R2SP_HOST_DEVICE __host__ __device__
#else
#define R2SP_HOST_DEVICE
#endif

namespace r2sp::models {

// True if element i of node `node` is kept at training step `step` with drop probability p:
// splitmix64 over the four inputs, its top 24 bits compared with p.
R2SP_HOST_DEVICE inline bool DropoutKeepHash(uint64_t seed, int64_t step, int node, int64_t i,
                                             float p) {
  uint64_t z = seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(node) << 48) ^
               static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f) >= p;
}

}  // namespace r2sp::models

#endif  // R2SP_MODELS_DROPOUT_HASH_H_
