//===- Interpreter.cpp - the evaluation loop and its checks ---------------===//
#include "OpTable.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "slapo/Dialect/SlapoOps.h"

#include "llvm/ADT/DenseMap.h"
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace slapo::reference {
namespace detail {
namespace {

constexpr int kMaxCallDepth = 64;

mlir::FailureOr<std::vector<at::Tensor>> evaluateFunc(mlir::func::FuncOp func,
                                                      Operands inputs,
                                                      EvalContext &context,
                                                      int depth);

/// func.call to a func.func of the same module, evaluated recursively.
void evaluateCall(mlir::Operation *op, Operands operands,
                  llvm::SmallVectorImpl<at::Tensor> &results,
                  EvalContext &context, int depth) {
  auto call = llvm::cast<mlir::func::CallOp>(op);
  auto callee = context.symbols.lookupNearestSymbolFrom<mlir::func::FuncOp>(
      op, call.getCalleeAttr());
  if (!callee)
    fail("callee @" + call.getCallee() + " is not a func.func");
  if (depth >= kMaxCallDepth)
    fail("calls nest deeper than " + llvm::Twine(kMaxCallDepth));
  mlir::FailureOr<std::vector<at::Tensor>> values =
      evaluateFunc(callee, operands, context, depth + 1);
  if (mlir::failed(values))
    fail("the call to @" + call.getCallee() + " failed");
  results.append(values->begin(), values->end());
}

mlir::LogicalResult evaluateOp(mlir::Operation *op, Operands operands,
                               llvm::SmallVectorImpl<at::Tensor> &results,
                               EvalContext &context, int depth);

/// A fusion group: its region's ops one by one on the operands, giving the
/// values its yield names.
void evaluateFused(mlir::Operation *op, Operands operands,
                   llvm::SmallVectorImpl<at::Tensor> &results,
                   EvalContext &context, int depth) {
  mlir::Block &body = llvm::cast<FusedOp>(op).getBody().front();
  llvm::DenseMap<mlir::Value, at::Tensor> values;
  for (auto [arg, tensor] : llvm::zip(body.getArguments(), operands))
    values[arg] = tensor;
  for (mlir::Operation &inner : body.without_terminator()) {
    llvm::SmallVector<at::Tensor> innerOperands, innerResults;
    for (mlir::Value operand : inner.getOperands())
      innerOperands.push_back(values.lookup(operand));
    if (mlir::failed(
            evaluateOp(&inner, innerOperands, innerResults, context, depth)))
      fail("an op of the fusion group failed");
    for (auto [result, tensor] : llvm::zip(inner.getResults(), innerResults))
      values[result] = tensor;
  }
  for (mlir::Value yielded : body.getTerminator()->getOperands())
    results.push_back(values.lookup(yielded));
}

const OpTable &opTable() {
  static const OpTable table = [] {
    OpTable table;
    registerElementwiseOps(table);
    registerNNOps(table);
    registerShapeOps(table);
    return table;
  }();
  return table;
}

/// Empty if `tensor` has the shape and dtype of `type`, else why not.
std::string mismatch(const at::Tensor &tensor, mlir::Type type) {
  if (!tensor.defined())
    return "is an undefined tensor";
  auto ranked = type.dyn_cast<mlir::RankedTensorType>();
  std::optional<at::ScalarType> dtype =
      ranked ? toScalarType(ranked.getElementType()) : std::nullopt;
  bool same =
      dtype && *dtype == tensor.scalar_type() &&
      ranked.getShape() == llvm::ArrayRef<int64_t>(tensor.sizes().vec());
  if (same)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "is " << describe(tensor) << " but the IR type is " << type;
  return os.str();
}

std::string exceptionMessage(const c10::Error &e) {
  std::string text = e.what_without_backtrace();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

/// Runs one op's evaluator; on failure emits an error at the op.
mlir::LogicalResult evaluateOp(mlir::Operation *op, Operands operands,
                               llvm::SmallVectorImpl<at::Tensor> &results,
                               EvalContext &context, int depth) {
  llvm::StringRef name = op->getName().getStringRef();
  try {
    if (llvm::isa<mlir::func::CallOp>(op)) {
      evaluateCall(op, operands, results, context, depth);
    } else if (llvm::isa<FusedOp>(op)) {
      evaluateFused(op, operands, results, context, depth);
    } else {
      const OpTable &table = opTable();
      auto it = table.find(name);
      if (it == table.end())
        return op->emitError("reference interpreter: no evaluator for '")
               << name << "'";
      it->second(op, operands, results, context);
    }
  } catch (const OpFailure &e) {
    return op->emitError("reference interpreter: ") << e.what();
  } catch (const c10::Error &e) {
    return op->emitError("reference interpreter: LibTorch failed on '")
           << name << "': " << exceptionMessage(e);
  } catch (const std::exception &e) {
    return op->emitError("reference interpreter: '")
           << name << "' failed: " << e.what();
  }
  if (results.size() != op->getNumResults())
    return op->emitError("reference interpreter: '")
           << name << "' produced " << results.size() << " tensors for "
           << op->getNumResults() << " results";
  for (auto [i, tensor] : llvm::enumerate(results)) {
    std::string why = mismatch(tensor, op->getResult(i).getType());
    if (!why.empty())
      return op->emitError("reference interpreter: result #")
             << i << " of '" << name << "' " << why;
  }
  return mlir::success();
}

mlir::FailureOr<std::vector<at::Tensor>> evaluateFunc(mlir::func::FuncOp func,
                                                      Operands inputs,
                                                      EvalContext &context,
                                                      int depth) {
  if (func.isExternal())
    return func.emitError("reference interpreter: @")
           << func.getSymName() << " has no body";
  if (!func.getBody().hasOneBlock())
    return func.emitError("reference interpreter: @")
           << func.getSymName() << " must have a single block";
  if (inputs.size() != func.getNumArguments())
    return func.emitError("reference interpreter: @")
           << func.getSymName() << " takes " << func.getNumArguments()
           << " inputs, got " << inputs.size();

  mlir::Block &block = func.getBody().front();
  llvm::DenseMap<mlir::Value, at::Tensor> values;
  for (auto [i, argument] : llvm::enumerate(block.getArguments())) {
    std::string why = mismatch(inputs[i], argument.getType());
    if (!why.empty())
      return func.emitError("reference interpreter: input #")
             << i << " of @" << func.getSymName() << " " << why;
    values[argument] = inputs[i];
  }

  // Drop every tensor after its last use, so a large model's intermediates
  // do not all stay alive.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value>> lastUses;
  {
    llvm::DenseMap<mlir::Value, mlir::Operation *> lastUser;
    for (mlir::Operation &op : block)
      for (mlir::Value operand : op.getOperands())
        lastUser[operand] = &op;
    for (auto &[value, op] : lastUser)
      lastUses[op].push_back(value);
  }

  for (mlir::Operation &op : block) {
    llvm::SmallVector<at::Tensor> operands;
    for (mlir::Value operand : op.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end())
        return op.emitError("reference interpreter: an operand of '")
               << op.getName() << "' is not defined in @" << func.getSymName();
      operands.push_back(it->second);
    }

    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      mlir::TypeRange types = func.getResultTypes();
      if (types.size() != operands.size())
        return op.emitError("reference interpreter: returns ")
               << operands.size() << " values for " << types.size()
               << " results";
      for (auto [i, tensor] : llvm::enumerate(operands)) {
        std::string why = mismatch(tensor, types[i]);
        if (!why.empty())
          return op.emitError("reference interpreter: returned value #")
                 << i << " " << why;
      }
      return std::vector<at::Tensor>(operands.begin(), operands.end());
    }

    llvm::SmallVector<at::Tensor> results;
    if (mlir::failed(evaluateOp(&op, operands, results, context, depth)))
      return mlir::failure();
    if (context.observer)
      context.observer(&op, results);
    for (auto [result, tensor] : llvm::zip(op.getResults(), results))
      if (!result.use_empty())
        values[result] = tensor;
    auto dead = lastUses.find(&op);
    if (dead != lastUses.end())
      for (mlir::Value value : dead->second)
        values.erase(value);
  }
  return func.emitError("reference interpreter: @")
         << func.getSymName() << " does not end in func.return";
}

} // namespace
} // namespace detail

mlir::FailureOr<std::vector<at::Tensor>>
evaluate(mlir::func::FuncOp func, llvm::ArrayRef<at::Tensor> inputs,
         const TensorMap &params, const OpObserver &observer) {
  // The evaluators rely on the verifiers' guarantees (operand counts, ranks,
  // attributes in range): refuse IR that does not verify.
  if (mlir::failed(mlir::verify(func)))
    return func.emitError("reference interpreter: @")
           << func.getSymName() << " does not verify";
  mlir::SymbolTableCollection symbols;
  detail::EvalContext context{params, symbols, observer};
  try {
    return detail::evaluateFunc(func, inputs, context, /*depth=*/0);
  } catch (const c10::Error &e) {
    return func.emitError("reference interpreter: ")
           << detail::exceptionMessage(e);
  } catch (const std::exception &e) {
    return func.emitError("reference interpreter: ") << e.what();
  }
}

bool hasEvaluator(llvm::StringRef opName) {
  // A fusion group's yield is evaluated with its group.
  return opName == mlir::func::CallOp::getOperationName() ||
         opName == mlir::func::ReturnOp::getOperationName() ||
         opName == FusedOp::getOperationName() ||
         opName == YieldOp::getOperationName() ||
         detail::opTable().count(opName);
}

double relativeError(const at::Tensor &actual, const at::Tensor &expected) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  try {
    if (!actual.defined() || !expected.defined())
      return actual.defined() == expected.defined() ? 0 : kInf;
    if (actual.scalar_type() != expected.scalar_type() ||
        actual.sizes() != expected.sizes())
      return kInf;
    if (actual.numel() == 0)
      return 0;
    at::NoGradGuard noGrad;
    if (!at::isFloatingType(actual.scalar_type()))
      return at::equal(actual.cpu(), expected.cpu()) ? 0 : kInf;

    at::Tensor a = actual.detach().to(at::kCPU, at::kDouble);
    at::Tensor e = expected.detach().to(at::kCPU, at::kDouble);
    at::Tensor aNan = at::isnan(a), eNan = at::isnan(e);
    if (at::ne(aNan, eNan).any().item<bool>())
      return kInf;
    // Equal entries (equal infinities and NaN pairs included) differ by 0.
    at::Tensor same = at::eq(a, e).logical_or_(aNan);
    at::Tensor zero = at::zeros_like(a);
    double error = at::where(same, zero, (a - e).abs()).max().item<double>();
    if (error == 0)
      return 0;
    double scale = at::where(eNan, zero, e.abs()).max().item<double>();
    double relative = error / std::max(scale, 1e-30);
    return std::isnan(relative) ? kInf : relative;
  } catch (const std::exception &) {
    return kInf;
  }
}

std::vector<at::Tensor> randomInputs(mlir::func::FuncOp func) {
  std::vector<at::Tensor> inputs;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = arg.getType().cast<mlir::RankedTensorType>();
    at::TensorOptions options =
        at::TensorOptions().dtype(*toScalarType(type.getElementType()));
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    if (type.getElementType().isa<mlir::FloatType>())
      inputs.push_back(at::randn(shape, options));
    else if (std::optional<slapo::IndexRange> range = slapo::getIndexRange(arg))
      inputs.push_back(at::randint(range->rows, shape, options));
    else
      inputs.push_back(at::randint(2, shape, options));
  }
  return inputs;
}

} // namespace slapo::reference
