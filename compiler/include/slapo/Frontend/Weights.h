//===- Weights.h - the parameters rank programs read ------------*- C++ -*-===//
#ifndef SLAPO_FRONTEND_WEIGHTS_H
#define SLAPO_FRONTEND_WEIGHTS_H

#include "slapo/Frontend/TorchScriptImporter.h"

namespace slapo {

/// Writes the value of every slapo.param of `module` (parameters and
/// buffers, by state_dict name) from `model` to the safetensors file `path`,
/// as tp rank `tpRank` of `tp` loads them at start: a param with a
/// `shard_axis` as that rank's shard of the model's tensor (the layout of
/// slapo/runtime/Shard.h), every other param whole. A parameter missing from
/// the model, of another dtype than the IR says, or whose IR shape is not the
/// model's (for a shard: with dim `shard_axis` divided by tp) is an error
/// naming it.
llvm::Error writeWeights(TorchScriptModel &model, mlir::ModuleOp module,
                         int64_t tpRank, int64_t tp, llvm::StringRef path);

} // namespace slapo

#endif // SLAPO_FRONTEND_WEIGHTS_H
