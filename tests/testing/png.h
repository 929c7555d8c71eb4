// A small PNG reader for tests: the plots tools write are checked for their size and for the
// colours of the series they should show, not just for being files of some size. Reads 8-bit
// RGB or RGBA, non-interlaced (what matplotlib's Agg backend writes).
#ifndef R2SP_TESTS_TESTING_PNG_H_
#define R2SP_TESTS_TESTING_PNG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace r2sp::testing {

struct PngImage {
  int width = 0;
  int height = 0;
  std::vector<uint32_t> rgb;  // 0xRRGGBB per pixel, row by row (alpha dropped)

  // Pixels whose colour is exactly `rgb` (0xRRGGBB).
  int64_t Count(uint32_t rgb) const;
};

// Decodes a PNG file's bytes. InvalidArgument naming what is wrong: signature, chunk, a
// format outside the one above, a bad zlib stream or filter.
absl::StatusOr<PngImage> DecodePng(absl::string_view bytes);

// matplotlib's default colour cycle, "C0".."C9", as 0xRRGGBB.
inline constexpr uint32_t kMatplotlibColors[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728,
                                                   0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f,
                                                   0xbcbd22, 0x17becf};

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_PNG_H_
