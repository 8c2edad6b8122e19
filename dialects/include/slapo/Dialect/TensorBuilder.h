//===- TensorBuilder.h - slapo ops written as tensor formulas ---*- C++ -*-===//
//
// Gradient rules (Vjp*.cpp) and the passes that add computation (the
// optimizer) are written as tensor formulas over slapo ops. TensorBuilder
// builds those ops at one location (a rule uses its forward op's; the module
// path comes from the caller's ModulePathScope) and works out their static
// result types, so that the code reads like the formula it implements.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DIALECT_TENSORBUILDER_H
#define SLAPO_DIALECT_TENSORBUILDER_H

#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"

#include <cassert>

namespace slapo {

/// The ranked tensor type of `value`.
inline mlir::RankedTensorType tensorType(mlir::Value value) {
  return value.getType().cast<mlir::RankedTensorType>();
}
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value value) {
  return tensorType(value).getShape();
}
inline int64_t rankOf(mlir::Value value) { return shapeOf(value).size(); }
inline mlir::Type elementTypeOf(mlir::Value value) {
  return tensorType(value).getElementType();
}

/// The gradient flowing into a single-result op; the pass calls a rule only
/// when some result has one.
inline mlir::Value singleResultGrad(mlir::ValueRange resultGrads) {
  assert(resultGrads.size() == 1 && resultGrads[0] &&
         "single-result op without a result gradient");
  return resultGrads[0];
}

/// The number of elements of a shape.
int64_t product(llvm::ArrayRef<int64_t> sizes);

class TensorBuilder {
public:
  TensorBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : builder(builder), loc(loc) {}

  // Elementwise, broadcasting like PyTorch; the result has `lhs`'s element
  // type (operands must have equal element types, as the verifiers demand).
  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value pow(mlir::Value lhs, mlir::Value rhs);
  mlir::Value maximum(mlir::Value lhs, mlir::Value rhs);
  mlir::Value minimum(mlir::Value lhs, mlir::Value rhs);
  /// `value` times the scalar `factor`, in `value`'s element type.
  mlir::Value scale(mlir::Value value, double factor);
  mlir::Value compare(ComparePredicate predicate, mlir::Value lhs,
                      mlir::Value rhs);
  mlir::Value where(mlir::Value condition, mlir::Value onTrue,
                    mlir::Value onFalse);
  /// A unary elementwise op (its result type is its operand's).
  template <typename OpT> mlir::Value unary(mlir::Value input) {
    return builder.create<OpT>(loc, input);
  }
  mlir::Value neg(mlir::Value input) { return unary<NegOp>(input); }
  mlir::Value cast(mlir::Value input, mlir::Type elementType);
  /// 1 where the integers `values` differ from `excluded`, else 0, in
  /// `elementType`: the targets a loss with an ignore_index counts.
  mlir::Value maskUnequal(mlir::Value values, int64_t excluded,
                          mlir::Type elementType);

  // Constants.
  /// A 0-d constant of a float element type.
  mlir::Value scalar(double value, mlir::Type elementType);
  /// A 0-d constant of an integer element type.
  mlir::Value integerScalar(int64_t value, mlir::Type elementType);
  /// A 0-d constant of `like`'s element type.
  mlir::Value scalarLike(double value, mlir::Value like) {
    return scalar(value, elementTypeOf(like));
  }
  /// A splat of `element`, of `type`'s element type; zero if null.
  mlir::Value splat(mlir::RankedTensorType type, mlir::Attribute element);
  /// A splat zero of `type`.
  mlir::Value zeros(mlir::RankedTensorType type) { return splat(type, {}); }
  /// splat(type, element) with `type`'s dim `dim` set to `size`.
  mlir::Value splatWithDim(mlir::RankedTensorType type, int64_t dim,
                           int64_t size, mlir::Attribute element);
  mlir::Value zerosWithDim(mlir::RankedTensorType type, int64_t dim,
                           int64_t size) {
    return splatWithDim(type, dim, size, {});
  }
  /// [0, 1, ..., size - 1] of `elementType`.
  mlir::Value arange(int64_t size, mlir::Type elementType);
  /// A [..., classes] tensor of `elementType`: 1 where the last index equals
  /// `indices[...]`, else 0. Indices outside [0, classes) give a zero row.
  mlir::Value oneHot(mlir::Value indices, int64_t classes,
                     mlir::Type elementType);

  // Reductions, contractions and data movement.
  mlir::Value sum(mlir::Value input, llvm::ArrayRef<int64_t> dims,
                  bool keepdim);
  mlir::Value mean(mlir::Value input, llvm::ArrayRef<int64_t> dims,
                   bool keepdim);
  mlir::Value max(mlir::Value input, llvm::ArrayRef<int64_t> dims,
                  bool keepdim);
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value reshape(mlir::Value input, llvm::ArrayRef<int64_t> shape);
  mlir::Value permute(mlir::Value input, llvm::ArrayRef<int64_t> permutation);
  /// Swaps the last two dims.
  mlir::Value transpose(mlir::Value input);
  mlir::Value slice(mlir::Value input, int64_t dim, int64_t start, int64_t end,
                    int64_t step = 1);
  /// Joins `inputs` along `dim`; a single input is returned as it is.
  mlir::Value concat(mlir::ValueRange inputs, int64_t dim);
  /// A tensor of shape `shape` holding `value` at positions start, start +
  /// step, ... along `dim` and `fill` elsewhere: what slice(dim, start, _,
  /// step) of it reads is `value`. `fill` is an element of `value`'s type;
  /// null is zero.
  mlir::Value padSlice(mlir::Value value, llvm::ArrayRef<int64_t> shape,
                       int64_t dim, int64_t start, int64_t step,
                       mlir::Attribute fill = {});
  /// `input` with its elements at positions start, start + step, ... along
  /// `dim` replaced by `value` (torch.slice_scatter).
  mlir::Value sliceScatter(mlir::Value input, mlir::Value value, int64_t dim,
                           int64_t start, int64_t step);
  mlir::Value broadcastTo(mlir::Value input, llvm::ArrayRef<int64_t> shape);

  /// The gradient of a value of type `type` that was broadcast to `grad`'s
  /// shape: `grad` summed over the leading dims and the dims where `type` has
  /// size 1, so that it gets `type`'s shape. Every rule of a broadcasting op
  /// uses this one reduction.
  mlir::Value sumToShape(mlir::Value grad, mlir::RankedTensorType type);
  /// `grad`, of a reduction over `dims` of `inputType` (with or without
  /// `keepdim`), reshaped to keep the reduced dims as size 1 so that it
  /// broadcasts against the input.
  mlir::Value restoreReducedDims(mlir::Value grad,
                                 mlir::RankedTensorType inputType,
                                 llvm::ArrayRef<int64_t> dims);

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::Location getLoc() { return loc; }

private:
  template <typename OpT>
  mlir::Value broadcasting(mlir::Value lhs, mlir::Value rhs);

  mlir::OpBuilder &builder;
  mlir::Location loc;
};

} // namespace slapo

#endif // SLAPO_DIALECT_TENSORBUILDER_H
