// The training script's optimizers, applied on the server as torch.optim applies them (its
// single-tensor CPU code, in fp32): SGD with momentum, dampening, nesterov and weight decay,
// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), on the
// gradient scale * grad. The state is torch's: SGD's momentum buffer (the first step takes the
// gradient itself), Adam's exp_avg and exp_avg_sq with bias correction by the update's number.
//
// An asynchronous push that carries `fraction` f < 1 of a global-batch step (b_i / B): SGD
// takes the fractional step of server/sgd.h (momentum decays per sample, the rate scales by f);
// Adam and AdamW scale the rate by f (the step size and AdamW's decay), decay their moments per
// sample (beta^f) and correct their bias by the global-batch steps (1 - beta^steps), so 1/f
// such updates weigh their gradients as one whole update does; the second moment takes
// f d^2 + (1 - f) m^2 (m bias-corrected) in place of d^2, for the push's gradient d averages
// f B samples and its square overstates the global batch's by their added noise.
#ifndef R2SP_SERVER_SCRIPT_OPTIMIZER_H_
#define R2SP_SERVER_SCRIPT_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/wire/optimizer_runs.h"
#include "proto/messages.pb.h"
#include "server/sgd.h"

namespace r2sp {

struct ScriptUpdate {
  float scale = 1.0f;     // multiplies the pushed gradient (bsp: 1 / workers, or weights)
  float fraction = 1.0f;  // of a global-batch step, in (0, 1]
  int64_t number = 1;     // this update's number for the partition, from 1
  double steps = 1.0;     // the partition's global-batch steps with this update (> 0)
};

// One update of n values with settings `s` (checked already: wire::CheckOptimizerSettings).
// `first` is SGD's momentum buffer or Adam's exp_avg, `second` Adam's exp_avg_sq (unused by
// SGD, may be null then). AVERAGE sets the weights to scale * grad (the clock's average).
// weight_out may equal weight_in (in place).
void ApplyScriptOptimizer(const proto::OptimizerSettings& s, const ScriptUpdate& update,
                          const float* grad, const float* weight_in, float* weight_out,
                          float* first, float* second, size_t n);

// Where n weights of a run will be after `updates` more updates of `fraction` of a step each,
// were each to move as the latest moments say (r2sp's predicted pulls): Adam and AdamW move by
// lr f m^ / (sqrt(v^) + eps) an update (AdamW's weights also decay by 1 - lr f wd), the bias
// corrected at `steps` (the partition's global-batch steps, > 0); an SGD run the server's own
// formulation does not cover, and an AVERAGE run, predict no move. `second` may be null before
// an Adam update (no move then either).
void PredictScriptRun(const proto::OptimizerSettings& s, double steps, float fraction,
                      int updates, const float* weights, const float* first, const float* second,
                      float* out, size_t n);

// The runs' optimizer as the server's own SGD (server/sgd.h), when every run is SGD without
// dampening or nesterov with the same rate, momentum and weight decay: the same updates bit
// for bit (the first step's buffer, torch's clone of the gradient, is the server's m = 0 * mu
// + d), and with it the server's fused paths and r2sp's predicted pulls. nullopt otherwise.
std::optional<SgdOptions> AsServerSgd(const std::vector<wire::OptimizerRun>& runs);

}  // namespace r2sp

#endif  // R2SP_SERVER_SCRIPT_OPTIMIZER_H_
