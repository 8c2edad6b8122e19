//===- VocabParallel.h - Megatron's vocabulary parallelism ------*- C++ -*-===//
//
// An embedding whose table is split along its rows, and a cross-entropy of
// logits split along the classes, computed by each tensor-parallel rank
// from its block: the rewrite of slapo-propagate-sharding for the ops whose
// sharding rules found them vocabulary-parallel.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_VOCABPARALLEL_H
#define SLAPO_TRANSFORMS_VOCABPARALLEL_H

#include "mlir/IR/Operation.h"

namespace slapo {

/// Replaces `op` (a slapo.embedding or slapo.cross_entropy whose operands
/// already have their types on one rank) by what each of `tp` ranks
/// computes with its block of the vocabulary.
void lowerVocabParallel(mlir::Operation *op, int64_t tp);

} // namespace slapo

#endif // SLAPO_TRANSFORMS_VOCABPARALLEL_H
