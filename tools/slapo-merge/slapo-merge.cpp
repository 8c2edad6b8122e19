//===- slapo-merge.cpp - merge a compiled program's tensors into one file -===//
//
//   slapo-merge OUT_DIR [CHECKPOINT] -o model.safetensors [--optimizer-state]
//
// Writes the state_dict of the model slapoc compiled into OUT_DIR, from the
// initial weights or from CHECKPOINT (a --save directory or one of its step
// directories), as one safetensors file that PyTorch's
// load_state_dict(strict=True) accepts: tensor-parallel shards are assembled
// into the model's tensors.
//
//===----------------------------------------------------------------------===//
#include "slapo/runtime/Merge.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

using namespace slapo::rt;

int main(int argc, char **argv) {
  std::string outDir, output;
  MergeOptions options;
  CLI::App app{"slapo-merge: writes the state_dict of a model compiled by "
               "slapoc, from its initial weights or a checkpoint, as one "
               "safetensors file with PyTorch's names (tied tensors under "
               "each of their names, tensor-parallel shards assembled)."};
  app.add_option("OUT_DIR", outDir, "slapoc's output directory")->required();
  app.add_option("CHECKPOINT", options.checkpoint,
                 "a checkpoint directory (its latest step) or a step "
                 "directory; without it, the initial weights");
  app.add_option("-o,--output", output, "the safetensors file to write")
      ->required();
  app.add_flag("--optimizer-state", options.optimizerState,
               "also write the checkpoint's optimizer state "
               "(<param>.exp_avg, ...)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is a success; every other parse error is a usage error.
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    MergedState state = mergeState(outDir, options);
    writeMergedState(output, state);
    std::string what = options.checkpoint.empty()
                           ? "the initial weights"
                           : "step " + std::to_string(state.step);
    std::string from = state.files.front();
    if (state.files.size() > 1)
      from += " and " + std::to_string(state.files.size() - 1) +
              " other ranks' files";
    std::printf("slapo-merge: wrote %s: %zu tensors, %llu bytes, %s (from "
                "%s)\n",
                output.c_str(), state.tensors.size(),
                static_cast<unsigned long long>(state.getBytes()), what.c_str(),
                from.c_str());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "slapo-merge: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
