// Delay compensation for gradients that land after other workers' updates (r2sp, asp).
//
// In r2sp a worker computes its gradient on the parameters it pulled at the end of its slot,
// but the servers apply it one slot later, after the other workers' updates: (B - b_i) / B of a
// global-batch step, always. With momentum the parameters keep drifting in the direction they
// moved in over the last round, so the worker computes its gradient where they are predicted
// to be when it lands, in the spirit of DANA (Hakimi et al., "Taming momentum in a distributed
// asynchronous environment", 2019):
//   x = p + alpha * (p - p_prev),  alpha = (B - b_i) / B
// where p_prev are the parameters this worker pulled one iteration earlier (one round of all
// workers' updates before p). The servers still apply the gradient to their current values;
// only the point it is evaluated at moves.
#ifndef R2SP_WORKER_LOOKAHEAD_H_
#define R2SP_WORKER_LOOKAHEAD_H_

#include <vector>

namespace r2sp {

class Lookahead {
 public:
  // The point to compute the next gradient at, given the freshly pulled `params` and the
  // fraction of a round that passes before the gradient lands (alpha, in [0, 1]). Remembers
  // `params` for the next call. The first call (nothing to extrapolate from) returns `params`.
  // The pointer stays valid until the next call.
  const float* Next(const std::vector<float>& params, float alpha);

 private:
  std::vector<float> previous_;
  std::vector<float> point_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_LOOKAHEAD_H_
