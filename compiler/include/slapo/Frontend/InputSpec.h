//===- InputSpec.h - static input declarations ------------------*- C++ -*-===//
//
// A forward argument declared by the user as `name=dtype[d0,d1,...]`, e.g.
// `input_ids=i64[8,128]`, `mask=i1[8,1,128,128]`, `scale=f32[]`.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_FRONTEND_INPUTSPEC_H
#define SLAPO_FRONTEND_INPUTSPEC_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>
#include <vector>

namespace slapo {

struct InputSpec {
  std::string name;
  std::string dtype; // one of dtypeNames()
  std::vector<int64_t> shape;
  /// The schedule's input() that declares it, for notes on errors its shape
  /// causes; none for an --input flag.
  std::optional<mlir::Location> declaration;
  /// How many data-parallel ranks share the declared batch: `shape` is one
  /// rank's share, dim 0 divided by this.
  int64_t dataParallelRanks = 1;

  mlir::RankedTensorType getType(mlir::MLIRContext &context) const;
  /// The spec in the syntax parseInputSpec reads.
  std::string str() const;
  /// The spec as declared, the whole batch of every data-parallel rank.
  std::string declaredStr() const;
};

/// The dtype spellings accepted in specs, in the order they are listed to
/// users.
llvm::ArrayRef<llvm::StringRef> dtypeNames();

/// The element type for a dtype name, or null if unknown.
mlir::Type parseDtype(mlir::MLIRContext &context, llvm::StringRef dtype);

/// Parses `name=dtype[d0,...]`; errors say what is wrong and what is valid.
llvm::Expected<InputSpec> parseInputSpec(llvm::StringRef text);

} // namespace slapo

#endif // SLAPO_FRONTEND_INPUTSPEC_H
