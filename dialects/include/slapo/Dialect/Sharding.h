//===- Sharding.h - what one rank holds of a value --------------*- C++ -*-===//
//
// Tensor parallelism's vocabulary, shared by the ops' sharding rules
// (dialects/lib/Sharding*.cpp, by op family) and the pass that runs them
// (slapo-propagate-sharding): a value is replicated, split along a dim, or a
// partial sum, and a rule works out its op's results from its operands
// through a ShardingContext.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DIALECT_SHARDING_H
#define SLAPO_DIALECT_SHARDING_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"

#include <functional>
#include <string>

namespace slapo {

/// What one rank holds of a value.
struct Sharding {
  enum class Kind { Replicated, Split, Partial };
  Kind kind = Kind::Replicated;
  /// Split: the dim, made of `chunks` equal chunks each split over the ranks.
  int64_t dim = 0;
  int64_t chunks = 1;

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t dim, int64_t chunks) {
    return {Kind::Split, dim, chunks};
  }
  static Sharding partial() { return {Kind::Partial, 0, 1}; }
  bool isReplicated() const { return kind == Kind::Replicated; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool operator==(const Sharding &other) const {
    return kind == other.kind && (kind != Kind::Split ||
                                  (dim == other.dim && chunks == other.chunks));
  }
  bool operator!=(const Sharding &other) const { return !(*this == other); }

  /// "replicated", "a partial sum", "split along dim 1 in 3 chunks", for
  /// diagnostics.
  std::string str() const;
};

/// The analysis of @forward as a sharding rule sees it: what the values
/// computed so far are on one rank, and what the rule concludes about its
/// op. Rules change no IR themselves (an analysis that fails leaves
/// @forward as it was; only splitSourcesPerChunk re-splits parameters
/// before the analysis starts over): they register the changes one rank
/// needs with `onRewrite`, and the pass makes them once every op's rule
/// holds.
class ShardingContext {
public:
  virtual ~ShardingContext() = default;

  /// The number of ranks of the tensor-parallel group.
  virtual int64_t getTensorParallelSize() const = 0;
  virtual Sharding getSharding(mlir::Value value) = 0;
  /// The replicated biases to add to the partial sum `value` once it is
  /// complete (a row-parallel linear's): only ops that keep the sum a sum
  /// with the same trailing dims may take it (takesPendingBiases). Valid
  /// until the next result is set.
  virtual llvm::ArrayRef<mlir::Value> getPendingBiases(mlir::Value value) = 0;

  /// Gives `op`'s single result `sharding`; whether its gradient matters, the
  /// split parameters it comes from and the origin and pending biases of a
  /// partial sum flow from the operands.
  virtual void setResult(mlir::Operation *op, Sharding sharding) = 0;
  /// setResult for a view of `op`'s first operand (a reshape, a permute):
  /// the view's gradient is all-reduced where the operand's is.
  virtual void setViewResult(mlir::Operation *op, Sharding sharding) = 0;
  /// Makes `op`'s result a partial sum from which `biases` (replicated) are
  /// left out until the all_reduce that completes it adds them once; the
  /// rule registers the rewrite that takes them out of `op`.
  virtual void
  setPartialDeferringBiases(mlir::Operation *op,
                            llvm::ArrayRef<mlir::Value> biases) = 0;
  /// Makes `op`'s result the complete value of the partial sum `partial`
  /// (replicated), with the biases deferred to it added after `op`.
  virtual void setCompletedSum(mlir::Operation *op, mlir::Value partial) = 0;
  /// Makes `op`'s result a replicated value whose gradient the backward
  /// all-reduces, so that it may meet split computation.
  virtual void setGradientSyncedResult(mlir::Operation *op) = 0;

  /// Lets `operand`'s op read only this rank's blocks along `dim` of the
  /// replicated value it uses, one in each of the dim's `chunks` chunks (a
  /// slapo.scatter put before the op; its gradient gathers the ranks'
  /// blocks, so the value's gradient is whole).
  virtual void takeBlockOfReplicated(mlir::OpOperand &operand, int64_t dim,
                                     int64_t chunks) = 0;
  /// Splits the parameters that the split `value` comes from in `chunks`
  /// chunks each, and starts the analysis over; fails, changing nothing,
  /// when `value` comes from no split parameter.
  virtual mlir::LogicalResult splitSourcesPerChunk(mlir::Value value,
                                                   int64_t chunks) = 0;
  /// Marks `op` vocabulary-parallel: the rewrite replaces it by what each
  /// rank computes with its block of a table split along its rows.
  virtual void markVocabParallel(mlir::Operation *op) = 0;
  /// Registers a change for the rewrite: it runs, in program order, after
  /// every value has its type on one rank.
  virtual void onRewrite(std::function<void()> change) = 0;

  /// An error at `op` that `op`'s sharding cannot hold.
  mlir::InFlightDiagnostic error(mlir::Operation *op) {
    return op->emitError("tensor parallelism: ");
  }
  /// The error that the partial sum `partial` reaches `op`, which needs the
  /// whole value; it names the op to sync.
  virtual mlir::LogicalResult partialReaches(mlir::Operation *op,
                                             mlir::Value partial) = 0;
};

} // namespace slapo

#endif // SLAPO_DIALECT_SHARDING_H
