// See optimizer_runs.h.
#include "common/wire/optimizer_runs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp::wire {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer settings: ", what));
}

// OK if lo <= value < hi (or <= hi when `closed`), naming `name` otherwise.
absl::Status InRange(const char* name, double value, double lo, double hi, bool closed) {
  const bool ok = std::isfinite(value) && value >= lo && (closed ? value <= hi : value < hi);
  if (ok) return absl::OkStatus();
  return Bad(absl::StrCat(name, " ", value, " is outside [", lo, ", ", hi, closed ? "]" : ")"));
}

absl::Status CheckSgd(const proto::OptimizerSettings& s) {
  R2SP_RETURN_IF_ERROR(InRange("momentum", s.momentum(), 0, 1, false));
  R2SP_RETURN_IF_ERROR(InRange("dampening", s.dampening(), 0, 1, true));
  if (s.nesterov() && (s.momentum() <= 0 || s.dampening() != 0)) {
    return Bad(absl::StrCat("nesterov needs momentum > 0 and dampening 0 (got momentum ",
                            s.momentum(), ", dampening ", s.dampening(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckAdam(const proto::OptimizerSettings& s) {
  R2SP_RETURN_IF_ERROR(InRange("beta1", s.beta1(), 0, 1, false));
  R2SP_RETURN_IF_ERROR(InRange("beta2", s.beta2(), 0, 1, false));
  if (!(std::isfinite(s.eps()) && s.eps() > 0)) {
    return Bad(absl::StrCat("eps ", s.eps(), " is not > 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOptimizerSettings(const proto::OptimizerSettings& s) {
  const double kHuge = 1e30;
  R2SP_RETURN_IF_ERROR(InRange("lr", s.lr(), 0, kHuge, false));
  R2SP_RETURN_IF_ERROR(InRange("weight_decay", s.weight_decay(), 0, kHuge, false));
  switch (s.kind()) {
    case proto::OPTIMIZER_SGD:
      return CheckSgd(s);
    case proto::OPTIMIZER_ADAM:
    case proto::OPTIMIZER_ADAMW:
      return CheckAdam(s);
    case proto::OPTIMIZER_AVERAGE:
      return absl::OkStatus();
    default:
      return Bad(absl::StrCat("unknown optimizer kind ", static_cast<int>(s.kind())));
  }
}

absl::StatusOr<std::vector<OptimizerRun>> DecodeOptimizerRuns(
    const proto::PartitionOptimizer& optimizer, size_t num_elements) {
  if (optimizer.runs().empty()) return Bad("a partition optimizer with no runs");
  std::vector<OptimizerRun> runs;
  runs.reserve(optimizer.runs_size());
  size_t begin = 0;
  for (const proto::OptimizerRun& run : optimizer.runs()) {
    if (run.end() <= begin || run.end() > num_elements) {
      return Bad(absl::StrCat("run ", runs.size(), " ends at ", run.end(), " after ", begin,
                              "; ends must rise strictly up to the partition's ", num_elements,
                              " values"));
    }
    R2SP_RETURN_IF_ERROR(CheckOptimizerSettings(run.settings()));
    runs.push_back(OptimizerRun{begin, static_cast<size_t>(run.end()), run.settings()});
    begin = run.end();
  }
  if (begin != num_elements) {
    return Bad(absl::StrCat("the runs cover ", begin, " of the partition's ", num_elements,
                            " values"));
  }
  return runs;
}

absl::StatusOr<std::vector<proto::PartitionOptimizer>> EncodeOptimizerRuns(
    const ModelLayout& layout, const std::vector<int>& tensor_groups,
    const std::vector<proto::OptimizerSettings>& groups) {
  const std::vector<TensorInfo>& tensors = layout.tensors();
  if (tensor_groups.size() != tensors.size()) {
    return Bad(absl::StrCat(tensor_groups.size(), " tensor groups for a model of ",
                            tensors.size(), " tensors"));
  }
  for (const proto::OptimizerSettings& g : groups) R2SP_RETURN_IF_ERROR(CheckOptimizerSettings(g));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensor_groups[i] < 0 || static_cast<size_t>(tensor_groups[i]) >= groups.size()) {
      return Bad(absl::StrCat("tensor '", tensors[i].name, "' is in group ", tensor_groups[i],
                              " of ", groups.size()));
    }
  }
  std::vector<proto::PartitionOptimizer> out(layout.partitions().size());
  size_t t = 0;  // the tensor holding the partition's next element
  for (const Partition& p : layout.partitions()) {
    const size_t end = p.offset + p.num_elements;
    proto::PartitionOptimizer& runs = out[p.key];
    int last_group = -1;
    for (size_t at = p.offset; at < end;) {
      while (tensors[t].offset + tensors[t].num_elements <= at) ++t;
      const size_t stop = std::min(end, tensors[t].offset + tensors[t].num_elements);
      const int g = tensor_groups[t];
      if (g != last_group) {
        *runs.add_runs()->mutable_settings() = groups[g];
        last_group = g;
      }
      runs.mutable_runs(runs.runs_size() - 1)->set_end(stop - p.offset);
      at = stop;
    }
  }
  return out;
}

}  // namespace r2sp::wire
