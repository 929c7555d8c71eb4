// Seeds for the decoder targets (push_decoder, pull_decoder, codec, idx_loader, cifar_loader,
// checkpoint): valid inputs of every codec and format, as the targets read them (see their
// files). Checkpoints come from the real writer (CheckpointStore::Write).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/model_layout.h"
#include "models/graph.h"
#include "models/model_file.h"
#include "google/protobuf/text_format.h"
#include "proto/checkpoint.pb.h"
#include "server/checkpoint_store.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/seeds.h"

namespace r2sp::fuzz {
namespace {

Message PushOf(proto::Codec codec) {
  Message m;
  m.header.set_type(proto::PUSH);
  m.header.set_sender_role(proto::WORKER);
  m.header.set_codec(codec);
  return m;
}

Message SparsePush(proto::Codec codec, const std::vector<uint32_t>& ids,
                   const std::vector<float>& values, bool half, uint32_t chunk = 0) {
  Message m = PushOf(codec);
  m.header.mutable_push()->set_values(half ? proto::FP16 : proto::FP32);
  if (chunk != 0) m.header.mutable_push()->set_chunk_elements(chunk);
  m.payload.push_back(zmq::message_t(ids.data(), ids.size() * sizeof(uint32_t)));
  m.payload.push_back(half ? HalfFrame(values) : FloatFrame(values));
  return m;
}

void AddPushSeeds(Seeds* seeds) {
  auto& s = (*seeds)["push_decoder"];
  const std::string n8(1, 7);  // partitions of 1 + 7 = 8 values
  const std::vector<float> dense = {1, -2, 3, -4, 0.5f, 0, 7, -8};
  Message fp32 = PushOf(proto::FP32);
  fp32.payload.push_back(FloatFrame(dense));
  Message init = PushOf(proto::FP32);
  init.header.mutable_push()->set_init(true);
  init.payload.push_back(FloatFrame(dense));
  Message fp16 = PushOf(proto::FP16);
  fp16.payload.push_back(HalfFrame(dense));
  s["fp32"] = n8 + Frames(std::move(fp32)) + Frames(std::move(init));
  s["fp16"] = n8 + Frames(std::move(fp16));
  s["topk"] = n8 + Frames(SparsePush(proto::TOPK, {1, 5}, {0.5f, -1}, false));
  s["topk_fp16"] = n8 + Frames(SparsePush(proto::TOPK, {0, 3, 7}, {2, 3, 4}, true));
  // Chunks of 3: ids 0 and 2 carry 3 + 2 values.
  s["csc"] = n8 + Frames(SparsePush(proto::CSC, {0, 2}, {1, 2, 3, 4, 5}, false, 3));
  s["csc_fp16"] = n8 + Frames(SparsePush(proto::CSC, {1}, {1, 2, 3}, true, 3));
}

Message PullReply(proto::Codec codec, zmq::message_t payload, uint64_t delta_seq = 0) {
  Message m;
  m.header.set_type(proto::PULL);
  m.header.set_is_reply(true);
  m.header.set_codec(codec);
  m.header.set_clock(4);
  m.header.mutable_pull_reply()->set_waited_seconds(0.25);
  m.header.mutable_pull_reply()->set_steps(3.5);
  if (delta_seq != 0) m.header.mutable_pull_reply()->set_delta_seq(delta_seq);
  m.payload.push_back(std::move(payload));
  return m;
}

void AddPullSeeds(Seeds* seeds) {
  auto& s = (*seeds)["pull_decoder"];
  // What was asked: key, codec (0 fp32, 1 fp16, 2 fp16 deltas), values, delta base.
  auto asked = [](int codec, int n, int base) {
    return std::string{char(1), char(codec), char(n), char(base)};
  };
  const std::vector<float> w = {0.5f, -1, 2, 0.25f, 3};
  s["fp32"] = asked(0, 5, 0) + Frames(PullReply(proto::FP32, FloatFrame(w)));
  s["fp16"] = asked(1, 5, 0) + Frames(PullReply(proto::FP16, HalfFrame(w)));
  s["fp16_delta"] = asked(2, 5, 1) + Frames(PullReply(proto::FP16_DELTA, HalfFrame(w), 2)) +
                    Frames(PullReply(proto::FP16_DELTA, HalfFrame(w), 3)) +
                    Frames(PullReply(proto::FP32, FloatFrame(w), 9));
  Message error = PullReply(proto::FP32, FloatFrame(w));
  error.header.set_code(proto::NOT_READY);
  error.header.set_error("not yet");
  s["error"] = asked(0, 5, 0) + Frames(std::move(error));
}

void AddCodecSeeds(Seeds* seeds) {
  auto& s = (*seeds)["codec"];
  const std::vector<float> values = {0, -0.0f, 1, -2.5f, 65504, 1e-7f, 6e-5f, 3.14159f, 1e9f};
  const zmq::message_t half = HalfFrame(values);
  const std::string bytes(static_cast<const char*>(half.data()), half.size());
  s["fp16"] = std::string(1, 0) + bytes;
  s["fp16_unaligned"] = std::string(1, 2) + bytes;
  const std::string spec(1, 1);  // the selector: parse the rest as a codec spec
  s["spec_topk"] = spec + "topk:0.01,fp16";
  s["spec_topk_exact"] = spec + "TopK:1,exact";
  s["spec_csc"] = spec + "csc:0.05,fp16,chunk=64";
  s["spec_fp16_delta"] = spec + "fp16_delta";
}

void Put32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(static_cast<char>(v >> shift));
}

void AddDatasetSeeds(Seeds* seeds) {
  std::string images, labels;
  Put32(&images, 0x803);
  Put32(&images, 3);  // 3 images of 4x4
  Put32(&images, 4);
  Put32(&images, 4);
  for (int i = 0; i < 3 * 16; ++i) images.push_back(static_cast<char>(i * 5));
  Put32(&labels, 0x801);
  Put32(&labels, 3);
  labels += std::string{char(0), char(9), char(4)};
  std::string idx;
  AppendChunk(&idx, images);
  (*seeds)["idx_loader"]["three_images"] = idx + labels;
  std::string cifar;
  for (int r = 0; r < 2; ++r) {
    cifar.push_back(static_cast<char>(3 + r));
    for (int i = 0; i < 3072; ++i) cifar.push_back(static_cast<char>((i + r) % 256));
  }
  (*seeds)["cifar_loader"]["one_record"] = cifar.substr(0, 3073);
  (*seeds)["cifar_loader"]["two_records"] = cifar;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// As in checkpoint_fuzz.cc: server 0 of 2 over "w" (6 floats) in partitions of 2 (keys 0, 2).
// model_file_fuzz.cc's small graph, trained a little: a whole file (mode 0) and its payload
// alone (mode 1).
void AddModelFileSeeds(Seeds* seeds) {
  models::GraphBuilder b("fuzz", {1, 4, 4}, 3);
  int x = b.Conv(0, "c", 2, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn");
  b.Linear(x, "fc", 3);
  const models::Graph g = b.Finish();
  std::vector<float> params(g.num_parameters()), stats(g.BatchNormStatisticsSize(), 0.5f);
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * static_cast<float>(i);
  proto::ModelFile m = models::MakeModelFile(g, params.data(), stats);
  m.set_step(12);
  m.set_epoch(1);
  m.set_test_accuracy(0.75);
  m.set_data("cifar10");
  auto& s = (*seeds)["model_file"];
  s["file"] = std::string(1, '\0') + models::EncodeModelFile(m);
  s["payload"] = std::string(1, '\1') + m.SerializeAsString();
}

void AddCheckpointSeeds(Seeds* seeds) {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(6);
  const ModelLayout layout = *ModelLayout::Create({t}, 8, 2);
  CheckpointIdentity id{"fuzz", layout.Hash(), 0, 2, "bsp"};
  proto::ShardCheckpoint shard;
  for (uint64_t key : layout.KeysOf(0)) {
    proto::PartitionCheckpoint* p = shard.add_partitions();
    p->set_key(key);
    p->set_version(5);
    p->set_steps(5);
    p->set_clock(5);
    const std::vector<float> weights = {0.5f, -0.25f}, momentum = {0.125f, 0};
    p->set_weights(std::string(reinterpret_cast<const char*>(weights.data()), 8));
    p->set_momentum(std::string(reinterpret_cast<const char*>(momentum.data()), 8));
  }
  char dir_template[] = "/tmp/r2sp_seeds_XXXXXX";
  const std::filesystem::path dir = mkdtemp(dir_template);
  CheckpointStore store(dir.string(), 0, 1);
  const std::filesystem::path path = *store.Write(shard, id, 5, "final");
  const std::string manifest = ReadFile(path / "MANIFEST");
  const std::string bytes = ReadFile(path / "shard.bin");
  proto::CheckpointManifest without_files;
  google::protobuf::TextFormat::ParseFromString(manifest, &without_files);
  without_files.clear_files();
  std::string bare;
  google::protobuf::TextFormat::PrintToString(without_files, &bare);
  // Mode bit 0: the target appends shard.bin's entry; bit 1: it checks the identity.
  auto seed = [](int mode, const std::string& text, const std::string& shard_bytes) {
    std::string s(1, static_cast<char>(mode));
    AppendChunk(&s, text);
    return s + shard_bytes;
  };
  auto& s = (*seeds)["checkpoint"];
  s["written"] = seed(2, manifest, bytes);
  s["written_no_identity"] = seed(0, manifest, bytes);
  s["fixed_up"] = seed(3, bare, bytes);
  std::filesystem::remove_all(dir);
}

}  // namespace

void AddDecoderSeeds(Seeds* seeds) {
  AddPushSeeds(seeds);
  AddPullSeeds(seeds);
  AddCodecSeeds(seeds);
  AddDatasetSeeds(seeds);
  AddCheckpointSeeds(seeds);
  AddModelFileSeeds(seeds);
}

}  // namespace r2sp::fuzz
