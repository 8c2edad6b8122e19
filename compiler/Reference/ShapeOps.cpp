//===- ShapeOps.cpp - parameters, constants, reductions, data movement ----===//
#include "OpTable.h"

#include "slapo/Dialect/SlapoOps.h"

namespace slapo::reference::detail {
namespace {

at::Tensor getParam(GetParamOp op, EvalContext &context) {
  std::string name = op.getName().str();
  auto it = context.params.find(name);
  if (it != context.params.end())
    return it->second;
  // Tied parameters: the state may hold the tensor under another of its names.
  std::string tried;
  if (auto param = context.symbols.lookupNearestSymbolFrom<ParamOp>(
          op, op.getNameAttr())) {
    if (auto aliases = param.getAliases()) {
      for (mlir::Attribute alias : *aliases) {
        std::string aliasName = alias.cast<mlir::StringAttr>().str();
        auto found = context.params.find(aliasName);
        if (found != context.params.end())
          return found->second;
        tried += (tried.empty() ? "" : ", ") + ("'" + aliasName + "'");
      }
    }
  }
  fail("parameter '" + name + "' is missing from the " +
       std::to_string(context.params.size()) + " given tensors" +
       (tried.empty() ? std::string() : " (so are its aliases " + tried + ")"));
}

} // namespace

void registerShapeOps(OpTable &table) {
  // Parameters and constants.
  add<GetParamOp>(table, [](GetParamOp op, Operands, EvalContext &context) {
    return getParam(op, context);
  });
  // The interpreter computes the step's values from the state it is given:
  // the state a buffer's update writes is none of them.
  table.try_emplace(UpdateBufferOp::getOperationName(),
                    [](mlir::Operation *, Operands,
                       llvm::SmallVectorImpl<at::Tensor> &, EvalContext &) {});
  add<ConstantOp>(table, [](ConstantOp op, Operands, EvalContext &) {
    mlir::FailureOr<at::Tensor> tensor = toTensor(op.getValue());
    if (mlir::failed(tensor))
      fail("cannot convert the constant's value to a tensor");
    return *tensor;
  });
  add<ArangeOp>(table, [](ArangeOp op, Operands, EvalContext &) {
    // start + i * step evaluated in double, then rounded to the result type
    // (what PyTorch's CPU arange does with its double accumulator).
    int64_t length = shapeOf(op.getType())[0];
    at::Tensor index =
        at::arange(length, at::TensorOptions().dtype(at::kDouble));
    return (index * op.getStep().convertToDouble() +
            op.getStart().convertToDouble())
        .to(scalarTypeOf(op.getType()));
  });

  // Reductions. An empty dims list reduces nothing (the verifier's shape
  // rule), unlike PyTorch's dim=[] which reduces everything.
  add<SumOp>(table, [](SumOp op, Operands x, EvalContext &) {
    if (op.getDims().empty())
      return x[0].to(scalarTypeOf(op.getType()));
    // Keep the element type: PyTorch would widen integer sums to int64.
    return at::sum(x[0], toVector(op.getDims()), op.getKeepdim(),
                   scalarTypeOf(op.getType()));
  });
  add<MeanOp>(table, [](MeanOp op, Operands x, EvalContext &) {
    if (op.getDims().empty())
      return x[0];
    return at::mean(x[0], toVector(op.getDims()), op.getKeepdim());
  });
  add<MaxOp>(table, [](MaxOp op, Operands x, EvalContext &) {
    if (op.getDims().empty())
      return x[0];
    return at::amax(x[0], toVector(op.getDims()), op.getKeepdim());
  });
  add<CumsumOp>(table, [](CumsumOp op, Operands x, EvalContext &) {
    auto dim = static_cast<int64_t>(op.getDim());
    // Keep the element type: PyTorch would widen integer sums to int64.
    at::ScalarType type = scalarTypeOf(op.getType());
    if (!op.getReverse())
      return at::cumsum(x[0], dim, type);
    return at::cumsum(x[0].flip(dim), dim, type).flip(dim);
  });

  // Shape and data movement.
  add<ReshapeOp>(table, [](ReshapeOp op, Operands x, EvalContext &) {
    return x[0].reshape(shapeOf(op.getType()));
  });
  // One process runs every pipeline stage: a boundary passes its value on.
  add<StageBoundaryOp>(
      table, [](StageBoundaryOp, Operands x, EvalContext &) { return x[0]; });
  add<PermuteOp>(table, [](PermuteOp op, Operands x, EvalContext &) {
    return x[0].permute(toVector(op.getPermutation()));
  });
  add<SliceOp>(table, [](SliceOp op, Operands x, EvalContext &) {
    return x[0].slice(
        static_cast<int64_t>(op.getDim()), static_cast<int64_t>(op.getStart()),
        static_cast<int64_t>(op.getEnd()), static_cast<int64_t>(op.getStep()));
  });
  add<ConcatOp>(table, [](ConcatOp op, Operands x, EvalContext &) {
    return at::cat(at::TensorList(x.data(), x.size()),
                   static_cast<int64_t>(op.getDim()));
  });
  add<BroadcastOp>(table, [](BroadcastOp op, Operands x, EvalContext &) {
    return x[0].expand(shapeOf(op.getType()));
  });
}

} // namespace slapo::reference::detail
