//===- TrainingLoss.cpp - the loss train(loss=) adds to a forward ---------===//
#include "slapo/Frontend/TrainingLoss.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/STLExtras.h"

namespace slapo {

mlir::LogicalResult checkCrossEntropyTargets(const InputSpec &targets,
                                             mlir::Location where) {
  if (targets.dtype == "i64" || targets.dtype == "i32")
    return mlir::success();
  mlir::emitError(where) << "loss=\"cross_entropy\" takes its targets, "
                            "class indices (i64 or i32), from the last "
                            "input(), but that is "
                         << targets.declaredStr()
                         << ": declare the targets after the forward's inputs";
  return mlir::failure();
}

mlir::LogicalResult appendCrossEntropyLoss(mlir::func::FuncOp forward,
                                           const InputSpec &targets,
                                           mlir::Location where) {
  auto fail = [&](const llvm::Twine &message) {
    mlir::emitError(where) << "loss=\"cross_entropy\" " << message;
    return mlir::failure();
  };
  auto ret = llvm::cast<mlir::func::ReturnOp>(
      forward.getBody().front().getTerminator());
  llvm::ArrayRef<mlir::Type> results = forward.getFunctionType().getResults();
  auto logitsType = results.size() == 1
                        ? results[0].dyn_cast<mlir::RankedTensorType>()
                        : mlir::RankedTensorType();
  if (!logitsType || logitsType.getRank() < 2 ||
      !logitsType.getElementType().isa<mlir::FloatType>())
    return fail("needs a forward that returns logits [..., classes], but it "
                "returns " +
                (results.size() == 1
                     ? mlir::debugString(results[0])
                     : std::to_string(results.size()) + " values"));
  mlir::RankedTensorType targetsType = targets.getType(*forward.getContext());
  llvm::ArrayRef<int64_t> rows = logitsType.getShape().drop_back();
  // Both are one share of the batch: say which if it is split.
  if (targetsType.getShape() != rows)
    return fail("takes one class index per row of the logits " +
                mlir::debugString(logitsType) +
                " from the last input(), but it is " + targets.str() +
                (targets.batchShares > 1
                     ? " (" + targets.declaredStr() + " split by " +
                           targets.batchSplit + ")"
                     : std::string()));

  unsigned index = forward.getNumArguments();
  mlir::OpBuilder builder(ret);
  forward.insertArgument(
      index, targetsType,
      builder.getDictionaryAttr(builder.getNamedAttr(
          "slapo.name", builder.getStringAttr(targets.name))),
      where);
  TensorBuilder g(builder, where);
  int64_t classes = logitsType.getShape().back();
  int64_t numRows = logitsType.getNumElements() / classes;
  mlir::Value logits = ret.getOperand(0), target = forward.getArgument(index);
  if (logitsType.getRank() != 2)
    logits = g.reshape(logits, {numRows, classes});
  if (targetsType.getRank() != 1)
    target = g.reshape(target, {numRows});
  mlir::Value loss = builder.create<CrossEntropyOp>(
      where, mlir::RankedTensorType::get({}, logitsType.getElementType()),
      logits, target, builder.getI64IntegerAttr(kIgnoredTarget),
      ReductionAttr::get(builder.getContext(), Reduction::mean));
  ret->setOperands(loss);
  forward.setFunctionType(builder.getFunctionType(
      forward.getArgumentTypes(), mlir::TypeRange(loss.getType())));
  forward->setAttr(kAppendedLossAttrName,
                   builder.getStringAttr("cross_entropy"));
  return mlir::success();
}

} // namespace slapo
