// Whether values a peer sent are all finite: a NaN or Inf in a pushed gradient or initial value
// would spread through the weights (and, in BSP, through a whole clock's sum).
#ifndef R2SP_COMMON_WIRE_FINITE_H_
#define R2SP_COMMON_WIRE_FINITE_H_

#include <cstddef>

namespace r2sp::wire {

// Whether no value is NaN or ±Inf. Branch-free and vectorised (it reads every pushed value).
bool AllFinite(const float* values, size_t n);

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_FINITE_H_
