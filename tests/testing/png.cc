// A small PNG reader for tests; see png.h.
#include "tests/testing/png.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace r2sp::testing {
namespace {

constexpr absl::string_view kSignature("\x89PNG\r\n\x1a\n", 8);

uint32_t BigEndian32(absl::string_view b, size_t at) {
  return (uint32_t{static_cast<uint8_t>(b[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(b[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(b[at + 2])} << 8) | static_cast<uint8_t>(b[at + 3]);
}

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad PNG: ", why));
}

absl::StatusOr<std::string> Inflate(const std::string& data, size_t expected) {
  std::string out(expected, '\0');
  uLongf size = expected;
  const int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &size,
                            reinterpret_cast<const Bytef*>(data.data()), data.size());
  if (rc != Z_OK || size != expected) {
    return Bad(absl::StrCat("image data does not inflate to ", expected, " bytes (zlib ", rc, ")"));
  }
  return out;
}

uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<uint8_t>(pa <= pb && pa <= pc ? a : (pb <= pc ? b : c));
}

// Undoes each row's filter in place; `raw` holds, per row, the filter byte then the row.
absl::Status Unfilter(std::string& raw, int height, size_t stride, int bpp) {
  for (int y = 0; y < height; ++y) {
    uint8_t* row = reinterpret_cast<uint8_t*>(raw.data()) + y * (stride + 1);
    const uint8_t* prev = y > 0 ? row - (stride + 1) + 1 : nullptr;
    const uint8_t filter = row[0];
    ++row;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(bpp) ? row[i - bpp] : 0;
      const int b = prev != nullptr ? prev[i] : 0;
      const int c = prev != nullptr && i >= static_cast<size_t>(bpp) ? prev[i - bpp] : 0;
      switch (filter) {
        case 0:
          break;
        case 1:
          row[i] += a;
          break;
        case 2:
          row[i] += b;
          break;
        case 3:
          row[i] += (a + b) / 2;
          break;
        case 4:
          row[i] += Paeth(a, b, c);
          break;
        default:
          return Bad(absl::StrCat("row ", y, " has filter ", filter));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t PngImage::Count(uint32_t color) const { return std::count(rgb.begin(), rgb.end(), color); }

absl::StatusOr<PngImage> DecodePng(absl::string_view bytes) {
  if (bytes.substr(0, 8) != kSignature) return Bad("no PNG signature");
  PngImage image;
  int bpp = 0;
  std::string idat;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t length = BigEndian32(bytes, at);
    const absl::string_view type = bytes.substr(at + 4, 4);
    if (at + 12 + length > bytes.size()) return Bad(absl::StrCat("chunk ", type, " is cut"));
    const absl::string_view data = bytes.substr(at + 8, length);
    if (type == "IHDR") {
      if (length != 13) return Bad("IHDR is not 13 bytes");
      image.width = static_cast<int>(BigEndian32(data, 0));
      image.height = static_cast<int>(BigEndian32(data, 4));
      const int depth = data[8], color = data[9], interlace = data[12];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        return Bad(absl::StrCat("depth ", depth, ", colour type ", color, ", interlace ", interlace,
                                ": only 8-bit RGB(A), not interlaced"));
      }
      bpp = color == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      absl::StrAppend(&idat, data);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + length;
  }
  if (bpp == 0) return Bad("no IHDR");
  const size_t stride = static_cast<size_t>(image.width) * bpp;
  absl::StatusOr<std::string> raw = Inflate(idat, (stride + 1) * image.height);
  if (!raw.ok()) return raw.status();
  if (absl::Status s = Unfilter(*raw, image.height, stride, bpp); !s.ok()) return s;
  image.rgb.reserve(static_cast<size_t>(image.width) * image.height);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* row = reinterpret_cast<const uint8_t*>(raw->data()) + y * (stride + 1) + 1;
    for (int x = 0; x < image.width; ++x) {
      const uint8_t* p = row + x * bpp;
      image.rgb.push_back((uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]);
    }
  }
  return image;
}

}  // namespace r2sp::testing
