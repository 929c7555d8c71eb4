// Prints a built-in model's trainable tensors as the parameter servers see them, one per
// line: "NAME D0,D1,...". The examples' tests compare the PyTorch cnn's named_parameters()
// with these. Usage: model_tensors MODEL CHANNELS HEIGHT WIDTH (e.g. cnn 1 28 28).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "models/graph.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL CHANNELS HEIGHT WIDTH\n", argv[0]);
    return 2;
  }
  const r2sp::models::Shape input{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])};
  const auto graph = r2sp::models::BuildModel(argv[1], input, 10);
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  for (const r2sp::models::Param& p : graph->params) {
    std::string dims;
    for (int64_t d : p.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    std::printf("%s %s\n", p.name.c_str(), dims.c_str());
  }
  return 0;
}
