// See push_frames.h.
#include "common/wire/push_frames.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/codec/csc.h"
#include "common/codec/fp16.h"
#include "common/status_macros.h"
#include "common/wire/finite.h"
#include "common/wire/fp16_frame.h"

namespace r2sp::wire {
namespace {

bool IsAligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

absl::Status Bad(const Message& request, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("PUSH for key ", request.header.key(), " (",
                   proto::Codec_IsValid(request.header.codec())
                       ? proto::Codec_Name(request.header.codec())
                       : absl::StrCat("codec ", static_cast<int>(request.header.codec())),
                   "): ", why));
}

absl::Status CheckFinite(const Message& request, const float* values, size_t count) {
  // A NaN or Inf would spread through the weights (and, in BSP, the whole clock's sum).
  if (AllFinite(values, count)) return absl::OkStatus();
  return Bad(request, "carries a non-finite value (NaN or Inf)");
}

// Ids must rise strictly and stay below `limit`.
absl::Status CheckIds(const Message& request, const uint32_t* ids, size_t count, size_t limit,
                      const char* what) {
  for (size_t j = 0; j < count; ++j) {
    if (ids[j] >= limit) {
      return Bad(request, absl::StrCat(what, " ", ids[j], " at position ", j, " is out of range (",
                                       limit, ")"));
    }
    if (j > 0 && ids[j] <= ids[j - 1]) {
      return Bad(request, absl::StrCat(what, "s must rise strictly: ", ids[j - 1], " then ", ids[j],
                                       " at position ", j));
    }
  }
  return absl::OkStatus();
}

Message PushHeader(const PushFields& fields) {
  Message request;
  request.header.set_type(proto::PUSH);
  request.header.set_sender_role(proto::WORKER);
  request.header.set_sender_rank(fields.rank);
  request.header.set_key(fields.key);
  request.header.set_clock(fields.clock);
  if (fields.init) request.header.mutable_push()->set_init(true);
  if (fields.scale > 0.0f) request.header.mutable_push()->set_scale(fields.scale);
  return request;
}

}  // namespace

Message EncodeFp32Push(const PushFields& fields, const float* values, size_t n) {
  Message request = PushHeader(fields);
  request.payload.push_back(BorrowedFrame(values, n * sizeof(float)));
  return request;
}

Message EncodeFp16Push(const PushFields& fields, const float* values, size_t n) {
  Message request = PushHeader(fields);
  request.header.set_codec(proto::FP16);
  request.payload.push_back(Fp16Frame(values, n));
  return request;
}

Message EncodeEncodedFp16Push(const PushFields& fields, const uint16_t* half, size_t n) {
  Message request = PushHeader(fields);
  request.header.set_codec(proto::FP16);
  request.payload.push_back(BorrowedFrame(half, n * sizeof(uint16_t)));
  return request;
}

Message EncodeSkipPush(const PushFields& fields) {
  Message request = PushHeader(fields);
  request.header.mutable_push()->set_skip(true);
  return request;
}

Message EncodeSparsePush(const PushFields& fields, const codec::CodecSpec& spec,
                         const codec::SparseGradient& encoded) {
  Message request = PushHeader(fields);
  request.header.set_codec(spec.codec);
  proto::PushInfo* info = request.header.mutable_push();
  if (spec.fp16_values) info->set_values(proto::FP16);
  if (spec.codec == proto::CSC) info->set_chunk_elements(spec.chunk_elements);
  request.payload.emplace_back(encoded.ids.data(), encoded.ids.size() * sizeof(uint32_t));
  if (spec.fp16_values) {
    request.payload.emplace_back(encoded.half_values.data(),
                                 encoded.half_values.size() * sizeof(uint16_t));
  } else {
    request.payload.emplace_back(encoded.values.data(), encoded.values.size() * sizeof(float));
  }
  return request;
}

Message EncodeChunksPush(const PushFields& fields, const float* values, size_t n, uint32_t chunk,
                         const std::vector<uint32_t>& ids, bool fp16) {
  Message request = PushHeader(fields);
  request.header.set_codec(proto::CSC);
  request.header.mutable_push()->set_chunk_elements(chunk);
  if (fp16) request.header.mutable_push()->set_values(proto::FP16);
  size_t count = 0;
  for (uint32_t id : ids) count += codec::ChunkLength(n, chunk, id);
  std::vector<float> chosen(fp16 ? count : 0);  // fp16: rounded from here into its frame
  zmq::message_t frame(fp16 ? 0 : count * sizeof(float));
  float* out = fp16 ? chosen.data() : static_cast<float*>(frame.data());
  for (uint32_t id : ids) {
    const size_t length = codec::ChunkLength(n, chunk, id);
    if (length > 0) std::memcpy(out, values + static_cast<size_t>(id) * chunk, length * 4);
    out += length;
  }
  request.payload.emplace_back(ids.data(), ids.size() * sizeof(uint32_t));
  request.payload.push_back(fp16 ? Fp16Frame(chosen.data(), count) : std::move(frame));
  return request;
}

absl::StatusOr<GradientView> PushDecoder::Decode(const Message& request, size_t n) {
  switch (request.header.codec()) {
    case proto::FP32:
    case proto::FP16:
      return DecodeDense(request, n);
    case proto::TOPK:
    case proto::CSC:
      if (request.header.push().init()) {
        return Bad(request, "initial values must be dense (fp32 or fp16)");
      }
      return DecodeSparse(request, n);
    default:
      return Bad(request, "unknown codec");
  }
}

const float* PushDecoder::Values(const zmq::message_t& frame, bool half, size_t count,
                                 std::vector<float>* scratch) {
  if (count == 0) return nullptr;  // an empty frame's data may be null or misaligned: no copy
  if (half) {
    scratch->resize(count);
    codec::DecodeFp16(static_cast<const uint16_t*>(frame.data()), count, scratch->data());
    return scratch->data();
  }
  if (!IsAligned(frame.data(), alignof(float))) {
    scratch->resize(count);
    std::memcpy(scratch->data(), frame.data(), count * sizeof(float));
    return scratch->data();
  }
  return static_cast<const float*>(frame.data());
}

absl::StatusOr<GradientView> PushDecoder::DecodeDense(const Message& request, size_t n) {
  const bool half = request.header.codec() == proto::FP16;
  const size_t want = n * (half ? sizeof(uint16_t) : sizeof(float));
  if (request.payload.size() != 1 || request.payload[0].size() != want) {
    return Bad(request,
               absl::StrCat("must carry one frame of ", want, " bytes, got ", PayloadBytes(request),
                            " bytes in ", request.payload.size(), " frames"));
  }
  const float* values = Values(request.payload[0], half, n, &scratch_);
  R2SP_RETURN_IF_ERROR(CheckFinite(request, values, n));
  return GradientView::Dense(values, n);
}

absl::StatusOr<GradientView> PushDecoder::DecodeSparse(const Message& request, size_t n) {
  const bool topk = request.header.codec() == proto::TOPK;
  const proto::PushInfo& info = request.header.push();
  if (info.values() != proto::FP32 && info.values() != proto::FP16) {
    return Bad(request, absl::StrCat("values must be FP32 or FP16, got codec ",
                                     static_cast<int>(info.values())));
  }
  if (request.payload.size() != 2) {
    return Bad(request,
               absl::StrCat("must carry 2 frames (ids, values), got ", request.payload.size()));
  }
  const zmq::message_t& id_frame = request.payload[0];
  if (id_frame.size() % sizeof(uint32_t) != 0) {
    return Bad(request, absl::StrCat("the id frame's ", id_frame.size(),
                                     " bytes are not a whole number of u32"));
  }
  GradientView g;
  g.kind = topk ? GradientView::Kind::kSparse : GradientView::Kind::kChunks;
  g.num_elements = n;
  g.count = id_frame.size() / sizeof(uint32_t);
  const uint32_t* ids = static_cast<const uint32_t*>(id_frame.data());
  if (g.count > 0 && !IsAligned(ids, alignof(uint32_t))) {  // (an empty frame's data may be null)
    id_scratch_.resize(g.count);
    std::memcpy(id_scratch_.data(), ids, id_frame.size());
    ids = id_scratch_.data();
  }
  g.ids = ids;
  size_t values = g.count;
  if (topk) {
    R2SP_RETURN_IF_ERROR(CheckIds(request, ids, g.count, n, "index"));
  } else {
    g.chunk_elements = info.chunk_elements();
    if (g.chunk_elements == 0) return Bad(request, "chunk_elements must be > 0");
    const size_t chunks = codec::NumChunks(n, g.chunk_elements);
    R2SP_RETURN_IF_ERROR(CheckIds(request, ids, g.count, chunks, "chunk id"));
    values = 0;
    for (size_t j = 0; j < g.count; ++j) values += codec::ChunkLength(n, g.chunk_elements, ids[j]);
  }
  const bool half = info.values() == proto::FP16;
  const size_t want = values * (half ? sizeof(uint16_t) : sizeof(float));
  if (request.payload[1].size() != want) {
    return Bad(request, absl::StrCat("the value frame must hold ", want, " bytes for ", g.count,
                                     " ids, got ", request.payload[1].size()));
  }
  g.values = Values(request.payload[1], half, values, &scratch_);
  R2SP_RETURN_IF_ERROR(CheckFinite(request, g.values, values));
  return g;
}

}  // namespace r2sp::wire
