// Writes the fuzz targets' seed corpora: DIR/TARGET/seed-NAME for each seed (seeds.h),
// replacing the seed files there before (crash-* files, the inputs that once crashed a target,
// stay). Usage: bazel run //tests/fuzz:seed_generator -- "$PWD/tests/fuzz/corpus"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/fuzz/seeds.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  r2sp::fuzz::Seeds seeds;
  r2sp::fuzz::AddNodeSeeds(&seeds);
  r2sp::fuzz::AddDecoderSeeds(&seeds);
  for (const auto& [target, files] : seeds) {
    const fs::path dir = fs::path(argv[1]) / target;
    fs::create_directories(dir);
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path());
    }
    for (const auto& [name, bytes] : files) {
      std::ofstream out(dir / ("seed-" + name), std::ios::binary);
      out << bytes;
      if (!out) {
        std::fprintf(stderr, "cannot write %s\n", (dir / ("seed-" + name)).c_str());
        return 1;
      }
    }
    std::printf("%s: %zu seeds\n", target.c_str(), files.size());
  }
  return 0;
}
