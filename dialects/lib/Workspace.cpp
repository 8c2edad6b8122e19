//===- Workspace.cpp - the bytes kernels compute in besides results -------===//
//
// The LM head kernels (replace("cross_entropy")'s) hold a chunk of logits
// and partial sums while they run. Their size comes from the runtime's own
// layout function (LinearCrossEntropyWorkspace.h), the one the kernels lay
// the workspace out with, so the plan and the kernels cannot disagree.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/SlapoOps.h"

#include "slapo/runtime/LinearCrossEntropyWorkspace.h"

using namespace mlir;

namespace slapo {

namespace {

/// The workspace bytes of an LM head kernel of hidden [rows, features] and
/// weight [classes, features] (of one float type: the verifiers check it).
int64_t getLinearCrossEntropyWorkspaceBytes(rt::LinearCrossEntropyKernel kernel,
                                            Value hidden, Value weight,
                                            Value bias) {
  auto hiddenType = hidden.getType().cast<RankedTensorType>();
  int64_t classes = weight.getType().cast<RankedTensorType>().getDimSize(0);
  int64_t operandBytes = hiddenType.getElementTypeBitWidth() / 8;
  return rt::getLinearCrossEntropyWorkspace(kernel, hiddenType.getDimSize(0),
                                            hiddenType.getDimSize(1), classes,
                                            bias != nullptr, operandBytes)
      .bytes;
}

} // namespace

int64_t LinearCrossEntropyOp::getWorkspaceBytes() {
  return getLinearCrossEntropyWorkspaceBytes(
      rt::LinearCrossEntropyKernel::CrossEntropy, getHidden(), getWeight(),
      getBias());
}

int64_t LinearLogSumExpOp::getWorkspaceBytes() {
  return getLinearCrossEntropyWorkspaceBytes(
      rt::LinearCrossEntropyKernel::LogSumExp, getHidden(), getWeight(),
      getBias());
}

int64_t LinearLogSumExpGradOp::getWorkspaceBytes() {
  return getLinearCrossEntropyWorkspaceBytes(
      rt::LinearCrossEntropyKernel::LogSumExpGrad, getHidden(), getWeight(),
      getBias());
}

} // namespace slapo
