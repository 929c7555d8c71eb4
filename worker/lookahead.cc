// See lookahead.h.
#include "worker/lookahead.h"

#include <algorithm>
#include <cstddef>

namespace r2sp {

const float* Lookahead::Next(const std::vector<float>& params, float alpha) {
  const size_t n = params.size();
  if (previous_.size() != n) {
    previous_ = params;
    return params.data();
  }
  point_.resize(n);
  const float* p = params.data();
  float* prev = previous_.data();
  float* x = point_.data();
  for (size_t i = 0; i < n; ++i) {
    x[i] = p[i] + alpha * (p[i] - prev[i]);
    prev[i] = p[i];
  }
  return x;
}

}  // namespace r2sp
