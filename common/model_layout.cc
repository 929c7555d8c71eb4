// Partitioning and server assignment; see model_layout.h.
#include "common/model_layout.h"

#include <algorithm>
#include <iterator>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

absl::StatusOr<ModelLayout> ModelLayout::Create(const std::vector<proto::TensorSpec>& tensors,
                                                size_t partition_bytes, int num_servers) {
  if (tensors.empty()) return absl::InvalidArgumentError("the model has no tensors");
  if (partition_bytes < sizeof(float) || partition_bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition_bytes must be a positive multiple of 4, got ", partition_bytes));
  }
  if (num_servers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("need at least one server, got ",
                                                   num_servers));
  }
  ModelLayout layout;
  layout.num_servers_ = num_servers;
  absl::flat_hash_set<std::string> names;
  for (const proto::TensorSpec& spec : tensors) {
    if (spec.num_elements() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(), "' is empty"));
    }
    if (!names.insert(spec.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", spec.name(),
                                                     "'"));
    }
    layout.tensors_.push_back({spec.name(), spec.num_elements(), layout.total_elements_});
    layout.total_elements_ += spec.num_elements();
  }

  // Cut the flat model. `open` is the partition still accepting whole small tensors.
  const size_t max_elements = partition_bytes / sizeof(float);
  std::vector<Partition>& parts = layout.partitions_;
  bool open = false;
  for (const TensorInfo& tensor : layout.tensors_) {
    if (tensor.num_elements > max_elements) {
      open = false;
      const size_t pieces = (tensor.num_elements + max_elements - 1) / max_elements;
      const size_t base = tensor.num_elements / pieces;
      const size_t extra = tensor.num_elements % pieces;
      size_t offset = tensor.offset;
      for (size_t i = 0; i < pieces; ++i) {
        const size_t n = base + (i < extra ? 1 : 0);
        parts.push_back({parts.size(), offset, n, 0});
        offset += n;
      }
      continue;
    }
    if (open && parts.back().num_elements + tensor.num_elements <= max_elements) {
      parts.back().num_elements += tensor.num_elements;
    } else {
      parts.push_back({parts.size(), tensor.offset, tensor.num_elements, 0});
      open = true;
    }
  }

  // Longest-processing-time greedy: biggest partitions first, each to the server with the
  // fewest bytes so far (ties: fewer partitions, then lower rank). Deterministic.
  std::vector<size_t> order(parts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&parts](size_t a, size_t b) {
    return parts[a].num_elements > parts[b].num_elements;
  });
  std::vector<size_t> load(num_servers, 0);
  std::vector<size_t> count(num_servers, 0);
  for (size_t index : order) {
    int best = 0;
    for (int s = 1; s < num_servers; ++s) {
      if (load[s] < load[best] || (load[s] == load[best] && count[s] < count[best])) best = s;
    }
    parts[index].server = best;
    load[best] += parts[index].num_elements;
    ++count[best];
  }
  return layout;
}

std::pair<uint64_t, uint64_t> ModelLayout::KeysCovering(size_t offset, size_t count) const {
  CHECK_GE(count, 1u);
  CHECK_LE(offset + count, total_elements_);
  // The last partition starting at or before an element holds it.
  auto holding = [this](size_t element) {
    const auto after = std::upper_bound(
        partitions_.begin(), partitions_.end(), element,
        [](size_t e, const Partition& p) { return e < p.offset; });
    return std::prev(after)->key;
  };
  return {holding(offset), holding(offset + count - 1)};
}

std::vector<uint64_t> ModelLayout::KeysOf(int server) const {
  std::vector<uint64_t> keys;
  for (const Partition& p : partitions_) {
    if (p.server == server) keys.push_back(p.key);
  }
  return keys;
}

size_t ModelLayout::BytesOf(int server) const {
  size_t bytes = 0;
  for (const Partition& p : partitions_) {
    if (p.server == server) bytes += p.bytes();
  }
  return bytes;
}

uint64_t ModelLayout::Hash() const {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  auto mix_u64 = [&mix](uint64_t v) { mix(&v, sizeof(v)); };
  mix_u64(static_cast<uint64_t>(num_servers_));
  for (const TensorInfo& t : tensors_) {
    mix(t.name.data(), t.name.size());
    mix_u64(t.num_elements);
  }
  for (const Partition& p : partitions_) {
    mix_u64(p.offset);
    mix_u64(p.num_elements);
    mix_u64(static_cast<uint64_t>(p.server));
  }
  return h;
}

}  // namespace r2sp
