// How a model (an ordered list of named fp32 tensors) is cut into partitions of at most
// partition_bytes, keyed, and spread over the servers so each holds about the same bytes.
// Workers and servers compute the same layout from the same inputs (the address book).
#ifndef R2SP_COMMON_MODEL_LAYOUT_H_
#define R2SP_COMMON_MODEL_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

struct TensorInfo {
  std::string name;
  size_t num_elements;
  size_t offset;  // first element in the flat model
};

// A contiguous range of the flat model. Small consecutive tensors share a partition; a
// tensor larger than the limit is split into near-equal pieces.
struct Partition {
  uint64_t key;     // == index in ModelLayout::partitions()
  size_t offset;    // first element in the flat model
  size_t num_elements;
  int server;       // rank of the server that owns it

  size_t bytes() const { return num_elements * sizeof(float); }
};

// Immutable after Create(); safe to share between threads.
class ModelLayout {
 public:
  // REQUIRES of the inputs (checked, InvalidArgument otherwise): at least one tensor, no
  // empty tensors or duplicate names, partition_bytes >= 4 and a multiple of 4,
  // num_servers >= 1.
  static absl::StatusOr<ModelLayout> Create(const std::vector<proto::TensorSpec>& tensors,
                                            size_t partition_bytes, int num_servers);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<Partition>& partitions() const { return partitions_; }
  size_t total_elements() const { return total_elements_; }
  size_t total_bytes() const { return total_elements_ * sizeof(float); }
  int num_servers() const { return num_servers_; }

  // The partition with this key, or nullptr for an unknown key.
  const Partition* Find(uint64_t key) const {
    return key < partitions_.size() ? &partitions_[key] : nullptr;
  }
  // The keys of the first and the last partition holding any of [offset, offset + count): the
  // partitions are contiguous and in key order, so those and every key between them.
  // REQUIRES: count >= 1 and offset + count <= total_elements().
  std::pair<uint64_t, uint64_t> KeysCovering(size_t offset, size_t count) const;
  // Keys owned by `server`, ascending.
  std::vector<uint64_t> KeysOf(int server) const;
  // Bytes owned by `server`.
  size_t BytesOf(int server) const;
  // A fingerprint (64-bit FNV-1a) of the tensors' names and sizes and of every partition's
  // place and server: checkpoints are only restored into the layout they were taken from.
  uint64_t Hash() const;

 private:
  ModelLayout() = default;

  std::vector<TensorInfo> tensors_;
  std::vector<Partition> partitions_;
  size_t total_elements_ = 0;
  int num_servers_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_MODEL_LAYOUT_H_
