//===- Optimizer.cpp - the training step: forward, backward, update -------===//
//
// @train_step inlines @forward_backward and appends what torch.optim does
// after loss.backward(): gradient clipping, the learning rate of this step,
// and one in-place update per trained parameter. Everything but the updates
// is ordinary slapo ops, so clipping and schedules need no kernels of their
// own and the memory plan and code generation treat them like the model.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace slapo {
#define GEN_PASS_DEF_OPTIMIZER
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;
  void runOnOperation() override;

  LogicalResult checkOptions(ModuleOp module);
  /// min(1, gradClip / (norm + 1e-6)) of the gradients' global norm, 0-d
  /// f32: what clipping multiplies each of them by.
  Value getClipCoefficient(TensorBuilder &tb, ArrayRef<Value> grads,
                           ArrayRef<ParamOp> params);
  /// The learning rate of step `step` (0-d i64) out of `totalSteps`, 0-d f64.
  Value buildLearningRate(TensorBuilder &tb, Value step, Value totalSteps);
  /// Declares the optimizer state `<param>.<suffix>` after `after` (the
  /// param or its previous state), which it then becomes.
  FailureOr<FlatSymbolRefAttr> declareState(SymbolTable &symbols,
                                            Operation *&after, ParamOp param,
                                            StringRef suffix);
};

LogicalResult OptimizerPass::checkOptions(ModuleOp module) {
  auto bad = [&]() { return module.emitError("slapo-optimizer: "); };
  if (optimizer != "adamw" && optimizer != "sgd")
    return bad() << "unknown optimizer '" << optimizer << "' (adamw or sgd)";
  if (lrSchedule != "constant" && lrSchedule != "warmup_cosine")
    return bad() << "unknown lr-schedule '" << lrSchedule
                 << "' (constant or warmup_cosine)";
  if (!(std::isfinite(lr) && lr > 0))
    return bad() << "lr must be positive, got " << double(lr);
  if (!(std::isfinite(gradClip) && gradClip >= 0))
    return bad() << "grad-clip must be 0 (off) or positive, got "
                 << double(gradClip);
  if (warmupSteps < 0)
    return bad() << "warmup-steps must not be negative, got "
                 << int64_t(warmupSteps);
  return success();
}

Value OptimizerPass::getClipCoefficient(TensorBuilder &tb,
                                        ArrayRef<Value> grads,
                                        ArrayRef<ParamOp> params) {
  // A tensor-parallel shard's gradient holds this rank's part of the
  // parameter's: those squares are summed over the group, the replicated
  // ones counted once.
  Value replicated, sharded;
  for (auto [grad, param] : llvm::zip(grads, params)) {
    if (param->hasAttr(kTiedCopyAttrName))
      continue;
    auto dims = llvm::seq<int64_t>(0, shapeOf(grad).size());
    SmallVector<int64_t> allDims(dims.begin(), dims.end());
    Value squares = tb.sum(tb.mul(grad, grad), allDims, /*keepdim=*/false);
    Value &total = ParamOp(param).getShardAxis() ? sharded : replicated;
    total = total ? tb.add(total, squares) : squares;
  }
  if (sharded)
    sharded = tb.getBuilder()
                  .create<AllReduceOp>(tb.getLoc(), sharded, ProcessGroup::tp,
                                       /*mean=*/false)
                  .getResult(0);
  Type f32 = elementTypeOf(grads.front());
  Value sumOfSquares = replicated && sharded
                           ? tb.add(replicated, sharded)
                           : (replicated ? replicated : sharded);
  // A stage whose only gradient is a tied copy's adds nothing.
  if (!sumOfSquares)
    sumOfSquares = tb.scalar(0.0, f32);
  // Each pipeline stage holds the gradients of its own parameters.
  if (pp > 1)
    sumOfSquares = tb.getBuilder()
                       .create<AllReduceOp>(tb.getLoc(), sumOfSquares,
                                            ProcessGroup::pp, /*mean=*/false)
                       .getResult(0);
  Value norm = tb.unary<SqrtOp>(sumOfSquares);
  Value coefficient =
      tb.div(tb.scalar(gradClip, f32), tb.add(norm, tb.scalar(1e-6, f32)));
  return tb.minimum(coefficient, tb.scalar(1.0, f32));
}

Value OptimizerPass::buildLearningRate(TensorBuilder &tb, Value step,
                                       Value totalSteps) {
  Type f64 = tb.getBuilder().getF64Type();
  Value peak = tb.scalar(lr, f64);
  if (lrSchedule == "constant")
    return peak;
  // Hugging Face counts optimizer steps from 0.
  Value current = tb.sub(tb.cast(step, f64), tb.scalar(1.0, f64));
  Value warmup = tb.scalar(double(warmupSteps), f64);
  Value warmupFactor =
      tb.div(current, tb.scalar(std::max<double>(1, warmupSteps), f64));
  Value decaySteps =
      tb.maximum(tb.sub(tb.cast(totalSteps, f64), warmup), tb.scalar(1.0, f64));
  Value progress = tb.div(tb.sub(current, warmup), decaySteps);
  Value cosine = tb.unary<CosOp>(tb.scale(progress, M_PI));
  Value decayFactor = tb.maximum(
      tb.scale(tb.add(cosine, tb.scalar(1.0, f64)), 0.5), tb.scalar(0.0, f64));
  Value inWarmup = tb.compare(ComparePredicate::lt, current, warmup);
  return tb.mul(peak, tb.where(inWarmup, warmupFactor, decayFactor));
}

FailureOr<FlatSymbolRefAttr> OptimizerPass::declareState(SymbolTable &symbols,
                                                         Operation *&after,
                                                         ParamOp param,
                                                         StringRef suffix) {
  std::string name = (param.getSymName() + "." + suffix).str();
  if (Operation *existing = symbols.lookup(name))
    return existing->emitError("slapo-optimizer: the optimizer state of @")
           << param.getSymName() << " would be named \"" << name
           << "\", which is taken";
  OpBuilder builder(param->getContext());
  builder.setInsertionPointAfter(after);
  auto state = builder.create<OptimizerStateOp>(
      param.getLoc(), builder.getStringAttr(name),
      FlatSymbolRefAttr::get(param.getSymNameAttr()),
      TypeAttr::get(param.getType()));
  symbols.insert(state, std::next(Block::iterator(after)));
  after = state;
  return FlatSymbolRefAttr::get(state.getSymNameAttr());
}

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  SymbolTable symbols(module);
  auto forwardBackward = symbols.lookup<func::FuncOp>(kForwardBackwardName);
  if (!forwardBackward) {
    module.emitError("slapo-optimizer: there is no func.func @")
        << kForwardBackwardName << " (run slapo-autodiff first)";
    return signalPassFailure();
  }
  if (symbols.lookup(kTrainStepName)) {
    module.emitError("slapo-optimizer: @")
        << kTrainStepName << " exists already";
    return signalPassFailure();
  }

  // @train_step(inputs..., %step, %total_steps): the body of
  // @forward_backward, whose return gives the loss and the gradients.
  OpBuilder builder(forwardBackward);
  auto i64Scalar = RankedTensorType::get({}, builder.getI64Type());
  auto f64Scalar = RankedTensorType::get({}, builder.getF64Type());
  FunctionType gradType = forwardBackward.getFunctionType();
  SmallVector<Type> argTypes(gradType.getInputs());
  argTypes.append({i64Scalar, i64Scalar});
  Type lossType = gradType.getResult(0);
  auto trainStep = builder.create<func::FuncOp>(
      forwardBackward.getLoc(), kTrainStepName,
      builder.getFunctionType(argTypes, {lossType, f64Scalar}));
  Block *body = trainStep.addEntryBlock();
  for (unsigned i = 0, e = gradType.getNumInputs(); i < e; ++i)
    trainStep.setArgAttrs(i, forwardBackward.getArgAttrDict(i));
  unsigned stepIndex = gradType.getNumInputs();
  trainStep.setArgAttr(stepIndex, "slapo.name", builder.getStringAttr("step"));
  trainStep.setArgAttr(stepIndex + 1, "slapo.name",
                       builder.getStringAttr("total_steps"));
  Value step = body->getArgument(stepIndex);
  Value totalSteps = body->getArgument(stepIndex + 1);

  IRMapping mapping;
  Block &source = forwardBackward.getBody().front();
  mapping.map(source.getArguments(),
              body->getArguments().take_front(gradType.getNumInputs()));
  builder.setInsertionPointToEnd(body);
  for (Operation &op : source.without_terminator())
    builder.clone(op, mapping);
  // Masks are drawn per step: the forward's dropouts and their gradients'
  // (flash attention's among them) read this step's number, so they draw
  // one mask.
  for (auto dropout : body->getOps<DropoutOp>())
    dropout.getStepMutable().assign(step);
  for (auto attention : body->getOps<FlashAttentionOp>())
    if (attention.getDropoutP())
      attention.getStepMutable().assign(step);
  for (auto grad : body->getOps<FlashAttentionGradOp>())
    if (grad.getDropoutP())
      grad.getStepMutable().assign(step);
  auto sourceReturn = cast<func::ReturnOp>(source.getTerminator());
  Value loss = mapping.lookup(sourceReturn.getOperand(0));
  SmallVector<Value> grads;
  SmallVector<ParamOp> params;
  for (unsigned i = 1, e = sourceReturn.getNumOperands(); i < e; ++i) {
    auto name = forwardBackward.getResultAttrOfType<FlatSymbolRefAttr>(
        i, kGradOfAttrName);
    auto param = name ? symbols.lookup<ParamOp>(name.getAttr()) : ParamOp();
    if (!param) {
      forwardBackward.emitError("slapo-optimizer: result #")
          << i << " of @" << kForwardBackwardName
          << " is not the gradient of a slapo.param";
      trainStep.erase();
      return signalPassFailure();
    }
    if (llvm::is_contained(params, param)) {
      forwardBackward.emitError("slapo-optimizer: result #")
          << i << " of @" << kForwardBackwardName
          << " is a second gradient of @" << param.getSymName()
          << ": a part of a parameter read on several pipeline stages (run "
             "slapo-pipeline-rank first)";
      trainStep.erase();
      return signalPassFailure();
    }
    grads.push_back(mapping.lookup(sourceReturn.getOperand(i)));
    params.push_back(param);
  }

  for (auto [param, grad] : llvm::zip(params, grads)) {
    ModulePathScope inModule(builder, param);
    builder
        .create<ParamGradOp>(param.getLoc(),
                             FlatSymbolRefAttr::get(param.getSymNameAttr()),
                             grad)
        ->setAttr(kPhaseAttrName, builder.getStringAttr("backward"));
  }
  // Buffers take their new values once the step is done (below), after
  // every read of their old ones, recomputations included.
  SmallVector<UpdateBufferOp> bufferUpdates(body->getOps<UpdateBufferOp>());
  Operation *lastModelOp = nullptr;
  for (Operation &op : llvm::reverse(*body))
    if (!isa<UpdateBufferOp>(op)) {
      lastModelOp = &op;
      break;
    }
  TensorBuilder tb(builder, forwardBackward.getLoc());
  // Clipping scales each gradient by one coefficient as the update reads
  // it (torch.nn.utils.clip_grad_norm_ multiplies them in place).
  Value gradScale = gradClip > 0 && !grads.empty()
                        ? getClipCoefficient(tb, grads, params)
                        : Value();
  Value lrValue = buildLearningRate(tb, step, totalSteps);
  for (auto [param, grad] : llvm::zip(params, grads)) {
    auto paramName = FlatSymbolRefAttr::get(param.getSymNameAttr());
    Location loc = param.getLoc();
    ModulePathScope inModule(builder, param);
    Operation *after = param;
    if (optimizer == "adamw") {
      auto expAvg = declareState(symbols, after, param, "exp_avg");
      auto expAvgSq = declareState(symbols, after, param, "exp_avg_sq");
      if (failed(expAvg) || failed(expAvgSq)) {
        trainStep.erase();
        return signalPassFailure();
      }
      builder.create<AdamwUpdateOp>(
          loc, paramName, grad, lrValue, step, gradScale, *expAvg, *expAvgSq,
          builder.getF64FloatAttr(beta1), builder.getF64FloatAttr(beta2),
          builder.getF64FloatAttr(eps), builder.getF64FloatAttr(weightDecay));
      continue;
    }
    FlatSymbolRefAttr buffer;
    if (momentum != 0) {
      auto declared = declareState(symbols, after, param, "momentum_buffer");
      if (failed(declared)) {
        trainStep.erase();
        return signalPassFailure();
      }
      buffer = *declared;
    }
    builder.create<SgdUpdateOp>(loc, paramName, grad, lrValue, gradScale,
                                buffer, builder.getF64FloatAttr(momentum),
                                builder.getF64FloatAttr(weightDecay));
  }
  for (UpdateBufferOp update : bufferUpdates)
    update->moveBefore(body, body->end());
  builder.create<func::ReturnOp>(forwardBackward.getLoc(),
                                 ValueRange{loss, lrValue});
  auto optimizerPhase = builder.getStringAttr("optimizer");
  Block::iterator firstOptimizerOp =
      lastModelOp ? std::next(Block::iterator(lastModelOp)) : body->begin();
  for (Operation &op : llvm::make_range(firstOptimizerOp,
                                        Block::iterator(body->getTerminator())))
    op.setAttr(kPhaseAttrName, optimizerPhase);
  forwardBackward.erase();
}

} // namespace
} // namespace slapo
