// The tests' PNG reader on images made here: every row filter, RGB and RGBA, and what it
// refuses.
#include "tests/testing/png.h"

#include <zlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::testing {
namespace {

void Put32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

void Chunk(std::string& png, const std::string& type, const std::string& data) {
  Put32(png, data.size());
  const std::string body = type + data;
  png += body;
  Put32(png, crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size()));
}

int Predict(int filter, int a, int b, int c) {
  switch (filter) {
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) / 2;
    case 4: {
      const int p = a + b - c;
      const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      return pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
    }
    default:
      return 0;
  }
}

// A width x height image of `pixels` (bpp bytes each), row y filtered with filter y % 5.
std::string MakePng(int width, int height, int bpp, const std::vector<uint8_t>& pixels) {
  const size_t stride = static_cast<size_t>(width) * bpp;
  std::string raw;
  for (int y = 0; y < height; ++y) {
    const int filter = y % 5;
    raw.push_back(static_cast<char>(filter));
    for (size_t i = 0; i < stride; ++i) {
      const uint8_t* row = &pixels[y * stride];
      const int a = i >= static_cast<size_t>(bpp) ? row[i - bpp] : 0;
      const int b = y > 0 ? row[i - stride] : 0;
      const int c = y > 0 && i >= static_cast<size_t>(bpp) ? row[i - stride - bpp] : 0;
      raw.push_back(static_cast<char>(row[i] - Predict(filter, a, b, c)));
    }
  }
  std::string packed(compressBound(raw.size()), '\0');
  uLongf size = packed.size();
  compress(reinterpret_cast<Bytef*>(packed.data()), &size,
           reinterpret_cast<const Bytef*>(raw.data()), raw.size());
  packed.resize(size);
  std::string png("\x89PNG\r\n\x1a\n", 8), header;
  Put32(header, width);
  Put32(header, height);
  header += std::string{8, static_cast<char>(bpp == 4 ? 6 : 2), 0, 0, 0};
  Chunk(png, "IHDR", header);
  Chunk(png, "IDAT", packed.substr(0, size / 2));  // split: IDATs are one stream
  Chunk(png, "IDAT", packed.substr(size / 2));
  Chunk(png, "IEND", "");
  return png;
}

std::vector<uint8_t> Pattern(int width, int height, int bpp) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * bpp);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 37 + i / 7);
  return pixels;
}

TEST(PngTest, EveryFilterDecodesToThePixelsWritten) {
  for (int bpp : {3, 4}) {
    const std::vector<uint8_t> pixels = Pattern(9, 10, bpp);
    absl::StatusOr<PngImage> image = DecodePng(MakePng(9, 10, bpp, pixels));
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(image->width, 9);
    EXPECT_EQ(image->height, 10);
    ASSERT_EQ(image->rgb.size(), 90u);
    for (size_t p = 0; p < 90; ++p) {
      const uint32_t want =
          (pixels[p * bpp] << 16) | (pixels[p * bpp + 1] << 8) | pixels[p * bpp + 2];
      ASSERT_EQ(image->rgb[p], want) << "pixel " << p << ", " << bpp << " bytes a pixel";
    }
  }
}

TEST(PngTest, CountsExactColours) {
  std::vector<uint8_t> pixels(4 * 3 * 2, 0xff);
  pixels[0] = 0x1f, pixels[1] = 0x77, pixels[2] = 0xb4;
  pixels[3] = 0x1f, pixels[4] = 0x77, pixels[5] = 0xb4;
  absl::StatusOr<PngImage> image = DecodePng(MakePng(4, 2, 3, pixels));
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->Count(kMatplotlibColors[0]), 2);
  EXPECT_EQ(image->Count(0xffffff), 6);
  EXPECT_EQ(image->Count(kMatplotlibColors[1]), 0);
}

TEST(PngTest, RefusesWhatItCannotRead) {
  EXPECT_EQ(DecodePng("GIF89a").status(), absl::InvalidArgumentError("bad PNG: no PNG signature"));
  std::string png = MakePng(2, 2, 3, Pattern(2, 2, 3));
  png[8 + 8 + 8] = 16;  // IHDR's bit depth
  EXPECT_EQ(DecodePng(png).status(),
            absl::InvalidArgumentError(
                "bad PNG: depth 16, colour type 2, interlace 0: only 8-bit RGB(A), not "
                "interlaced"));
  png = MakePng(2, 2, 3, Pattern(2, 2, 3));
  png.resize(png.size() - 30);
  EXPECT_EQ(DecodePng(png).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace r2sp::testing
