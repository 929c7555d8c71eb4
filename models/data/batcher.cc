// See batcher.h.
#include "models/data/batcher.h"

#include <algorithm>

#include "glog/logging.h"

namespace r2sp::models {

Batcher::Batcher(const Dataset* data, const BatcherOptions& options)
    : data_(data), options_(options) {
  CHECK(options.world >= 1 && options.rank >= 0 && options.rank < options.world);
  for (int64_t i = options.rank; i < data->size(); i += options.world) order_.push_back(i);
  StartEpoch(0);
}

void Batcher::StartEpoch(int epoch) {
  epoch_ = epoch;
  cursor_ = 0;
  OrderForEpoch(options_.seed, epoch, options_.rank, options_.shuffle, &rng_, &order_);
}

int Batcher::Next(int batch, float* images, int32_t* labels) {
  return wrap_ ? NextWrapping(batch, images, labels) : Take(batch, images, labels);
}

int Batcher::Take(int batch, float* images, int32_t* labels) {
  const int64_t per_image = data_->shape.size();
  int n = 0;
  while (n < batch && cursor_ < order_.size()) {
    const int64_t index = order_[cursor_++];
    Normalise(*data_, index, options_.augment ? &rng_ : nullptr, images + n * per_image);
    labels[n] = data_->labels[index];
    ++n;
  }
  return n;
}

int Batcher::NextWrapping(int batch, float* images, int32_t* labels) {
  const int64_t per_image = data_->shape.size();
  int n = Take(batch, images, labels);
  while (n < batch && !order_.empty()) {
    StartEpoch(epoch_ + 1);
    n += Take(batch - n, images + n * per_image, labels + n);
  }
  return n;
}

void Batcher::Skip(int64_t samples, bool wrapping) {
  wrapping = wrapping || wrap_;
  while (samples > 0 && !order_.empty()) {
    const int64_t left = static_cast<int64_t>(order_.size() - cursor_);
    const int64_t take = std::min(left, samples);
    cursor_ += static_cast<size_t>(take);
    samples -= take;
    if (samples == 0 || !wrapping) return;
    StartEpoch(epoch_ + 1);
  }
}

void Batcher::Normalise(const Dataset& data, int64_t index, std::mt19937_64* rng, float* out) {
  const Shape& s = data.shape;
  const uint8_t* src = data.pixels.data() + index * s.size();
  int dy = 0, dx = 0;
  bool flip = false;
  if (rng != nullptr) {
    dy = static_cast<int>((*rng)() % 9) - 4;  // crop offset within the 4-pixel padding
    dx = static_cast<int>((*rng)() % 9) - 4;
    flip = ((*rng)() & 1) != 0;
  }
  for (int c = 0; c < s.c; ++c) {
    const float mean = data.mean.empty() ? 0.0f : data.mean[std::min<size_t>(c, data.mean.size() - 1)];
    const float inv = 1.0f / (data.stddev.empty() ? 1.0f : data.stddev[std::min<size_t>(c, data.stddev.size() - 1)]);
    for (int y = 0; y < s.h; ++y) {
      for (int x = 0; x < s.w; ++x) {
        const int sy = y + dy;
        const int sx = (flip ? s.w - 1 - x : x) + dx;
        float v = 0.0f;  // zero padding, in pixel space (normalised like a black pixel)
        if (sy >= 0 && sy < s.h && sx >= 0 && sx < s.w) v = src[(c * s.h + sy) * s.w + sx] / 255.0f;
        out[(c * s.h + y) * s.w + x] = (v - mean) * inv;
      }
    }
  }
}

}  // namespace r2sp::models
