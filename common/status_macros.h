// Propagation helpers for absl::Status / absl::StatusOr, in the style of Abseil's internal ones,
// and WithContext, which says what was being done when an error happened.
#ifndef R2SP_COMMON_STATUS_MACROS_H_
#define R2SP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include <utility>

namespace r2sp {

// `status` with "what: " before its message (same code); OK stays OK.
inline absl::Status WithContext(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// The same for a StatusOr: its value, or its error with context.
template <typename T>
absl::StatusOr<T> WithContext(absl::StatusOr<T> value, absl::string_view what) {
  if (value.ok()) return value;
  return WithContext(value.status(), what);
}

}  // namespace r2sp

#define R2SP_CONCAT_INNER_(a, b) a##b
#define R2SP_CONCAT_(a, b) R2SP_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define R2SP_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::absl::Status r2sp_status_ = (expr);         \
    if (!r2sp_status_.ok()) return r2sp_status_;  \
  } while (0)

// As R2SP_RETURN_IF_ERROR, with WithContext(status, what) returned.
#define R2SP_RETURN_IF_ERROR_WITH(expr, what)                              \
  do {                                                                     \
    ::absl::Status r2sp_status_ = (expr);                                  \
    if (!r2sp_status_.ok()) return ::r2sp::WithContext(r2sp_status_, what); \
  } while (0)

// `lhs = value of rexpr`, or returns its error status from the enclosing function.
#define R2SP_ASSIGN_OR_RETURN(lhs, rexpr) \
  R2SP_ASSIGN_OR_RETURN_IMPL_(R2SP_CONCAT_(r2sp_statusor_, __LINE__), lhs, rexpr)

#define R2SP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(statusor).value()

#endif  // R2SP_COMMON_STATUS_MACROS_H_
