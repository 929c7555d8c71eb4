// The seed generator's parts: each returns small valid inputs for some fuzz targets, in the
// layouts the targets read (fuzz_input.h). seed_generator.cc writes them to corpus/TARGET/.
#ifndef R2SP_TESTS_FUZZ_SEEDS_H_
#define R2SP_TESTS_FUZZ_SEEDS_H_

#include <map>
#include <string>
#include <vector>

#include "common/message.h"

namespace r2sp::fuzz {

// Seed file name (without the "seed-" prefix) -> contents, per target.
using Seeds = std::map<std::string, std::map<std::string, std::string>>;

// A message as TakeFrames reads it: its encoded header, then its payload frames.
std::string Frames(Message msg);
// A payload frame of these floats (fp32) or of their binary16 encoding.
zmq::message_t FloatFrame(const std::vector<float>& values);
zmq::message_t HalfFrame(const std::vector<float>& values);

// server_handler and scheduler_core (message sequences), message_header (their messages).
void AddNodeSeeds(Seeds* seeds);
// push_decoder, pull_decoder, codec, idx_loader, cifar_loader, checkpoint, model_file.
void AddDecoderSeeds(Seeds* seeds);

}  // namespace r2sp::fuzz

#endif  // R2SP_TESTS_FUZZ_SEEDS_H_
