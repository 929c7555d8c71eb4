// See sync_modes.h.
#include "common/sync_modes.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace r2sp {

absl::StatusOr<proto::SyncMode> ParseSyncMode(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "asp") return proto::ASP;
  if (lower == "bsp") return proto::BSP;
  if (lower == "ssp") return proto::SSP;
  if (lower == "r2sp") return proto::R2SP;
  if (lower == "easgd") return proto::EASGD;
  if (lower == "eawild") return proto::EAWILD;
  return absl::InvalidArgumentError(absl::StrCat(
      "--sync must be one of bsp, ssp, asp, r2sp, easgd, eawild; got '", name, "'"));
}

std::string SyncModeName(proto::SyncMode mode) {
  return absl::AsciiStrToLower(proto::SyncMode_Name(mode));
}

}  // namespace r2sp
