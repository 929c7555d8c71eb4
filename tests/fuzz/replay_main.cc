// A main for fuzz targets outside libFuzzer: runs every file named on the command line (a
// directory: every file in it, in name order) through LLVMFuzzerTestOneInput once. It makes
// each target's seed corpus a regression test (<target>_corpus_test) and lets a crash input be
// replayed in any build (bazel-bin/tests/fuzz/TARGET crash-file). Exit status 0 once every
// input ran; a crashing input kills the process, and the last "running" line names it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

// The files `arg` names: itself, or a directory's regular files (recursively), sorted.
std::vector<fs::path> FilesOf(const fs::path& arg) {
  std::vector<fs::path> files;
  if (!fs::is_directory(arg)) return {arg};
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(arg)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    if (!fs::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
    for (const fs::path& file : FilesOf(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", file.c_str());
        return 2;
      }
      std::fprintf(stderr, "running %s (%zu bytes)\n", file.c_str(), bytes.size());
      // A copy of exactly the input's size, so a read past its end is a heap overflow that a
      // sanitizer build reports (as libFuzzer arranges too).
      std::vector<uint8_t> data(bytes.begin(), bytes.end());
      LLVMFuzzerTestOneInput(data.data(), data.size());
      ++ran;
    }
  }
  if (ran == 0) {
    std::fprintf(stderr, "no inputs found\n");
    return 1;
  }
  std::fprintf(stderr, "%zu inputs ran without a crash\n", ran);
  return 0;
}
