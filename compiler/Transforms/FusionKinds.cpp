//===- FusionKinds.cpp - the named kinds of fuse(kind) --------------------===//
//
// Each kind is Megatron's fusion of the same name: a pattern that the
// module's forward must compute, matched op by op on the training step
// (slapo-fuse-elementwise runs after autodiff, the optimizer and
// checkpointing), and a preparation that makes the pattern's elementwise
// ops one chain of one shape. The grouping itself is slapo-fuse-elementwise's,
// restricted to the ops the kind names: the matched forward ops, their
// recomputations and the elementwise ops of their gradients.
//
//===----------------------------------------------------------------------===//
#include "FusionKinds.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace slapo {
namespace {

bool isRecomputed(Operation *op) { return op->hasAttr(kRecomputedAttrName); }

bool isBackwardOp(Operation *op) {
  auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
  return phase && phase.getValue() == "backward" && !isRecomputed(op);
}

/// The readers of `op`'s result in `op`'s own computation (not the
/// backward's), in program order.
SmallVector<Operation *> getReadersInComputation(Operation *op) {
  SmallVector<Operation *> readers;
  for (Operation *user : op->getResult(0).getUsers())
    if (isSameComputation(op, user) && !llvm::is_contained(readers, user))
      readers.push_back(user);
  llvm::sort(readers,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return readers;
}

/// A copy of `op` right before `reader`, placed as `reader` is (its
/// computation, and its module, so that the copy may join its group), with
/// the operands `mapping` gives.
Operation *cloneFor(Operation *op, Operation *reader, IRMapping &mapping) {
  OpBuilder builder(reader);
  Operation *again = builder.clone(*op, mapping);
  placeLike(again, reader);
  return again;
}

/// `op` computed again right before `reader`, in `reader`'s computation:
/// a value the backward recomputes in its group instead of the forward's
/// group writing it.
Operation *computeAgainFor(Operation *op, Operation *reader) {
  IRMapping mapping;
  Operation *again = cloneFor(op, reader, mapping);
  reader->replaceUsesOfWith(op->getResult(0), again->getResult(0));
  return again;
}

/// Whether `op` is a cast that widens exactly (mixed precision's bf16
/// product to f32).
bool isWideningCast(Operation *op) {
  auto cast = dyn_cast_or_null<CastOp>(op);
  return cast && cast.isWidening();
}

/// The ops of a kind in one module: the matched forward ops (and
/// recomputations) and what the groups may hold.
class KindMatcher {
public:
  KindMatcher(func::FuncOp step, StringRef module,
              SmallPtrSetImpl<Operation *> &members, Mismatch &mismatch)
      : step(step), module(module), members(members), mismatch(mismatch) {}

  /// The module's ops of type OpT in the forward or a recomputation of it
  /// (none where the forward has none), in program order, and its forward
  /// ops in `forward`, `at` set to the first. Fails where it has none: the
  /// step of a pipeline stage holds only the stage's modules.
  template <typename OpT>
  FailureOr<SmallVector<OpT>> collect(SmallVectorImpl<Operation *> &forward,
                                      Operation *&at) {
    SmallVector<OpT> anchors;
    for (Operation &op : step.getBody().front()) {
      if (!isInModule(&op, module))
        continue;
      if (isForwardOp(&op))
        forward.push_back(&op);
      if (auto anchor = dyn_cast<OpT>(&op);
          anchor && (isForwardOp(&op) || isRecomputed(&op)))
        anchors.push_back(anchor);
    }
    if (forward.empty())
      return failure();
    at = forward.front();
    if (!anchors.empty() && !isForwardOp(anchors.front()))
      anchors.clear();
    return anchors;
  }

  LogicalResult fail(Operation *op, const Twine &message) {
    mismatch = {message.str(), op};
    return failure();
  }

  /// Adds a matched op (of the forward or a recomputation) to the groups'
  /// ops.
  void addMatched(Operation *op) {
    members.insert(op);
    if (isForwardOp(op))
      matched.push_back(op);
  }

  /// Adds the elementwise ops of the matched forward ops' gradients: the
  /// backward's ops at their location and module path (autodiff gives a
  /// gradient's ops the forward op's).
  void addGradients() {
    for (Operation &op : step.getBody().front())
      if (isBackwardOp(&op) && op.hasTrait<OpTrait::FusibleElementwise>() &&
          llvm::any_of(matched, [&](Operation *forward) {
            return forward->getLoc() == op.getLoc() &&
                   getModulePath(forward) == getModulePath(&op);
          }))
        members.insert(&op);
  }

  /// Adds the casts that widen what only the groups' ops read (mixed
  /// precision's bf16 products): the groups read them in bf16.
  void addWideningCasts() {
    for (Operation *member : llvm::to_vector(members))
      for (Value operand : member->getOperands()) {
        Operation *cast = operand.getDefiningOp();
        if (isWideningCast(cast) && isSameComputation(cast, member) &&
            llvm::all_of(cast->getUsers(), [&](Operation *user) {
              return members.contains(user);
            }))
          members.insert(cast);
      }
  }

  /// Adds the casts that round the groups' values to bf16 (for the next
  /// product): the groups write them in bf16, as fusion's other groups do.
  void addNarrowingCasts() {
    for (Operation *member : llvm::to_vector(members))
      for (Operation *user : member->getUsers()) {
        auto cast = dyn_cast<CastOp>(user);
        if (cast && cast.isNarrowing() && isSameComputation(cast, member))
          members.insert(cast);
      }
  }

  func::FuncOp step;
  StringRef module;
  SmallPtrSetImpl<Operation *> &members;
  Mismatch &mismatch;
  SmallVector<Operation *> matched;
};

//===----------------------------------------------------------------------===//
// bias_gelu
//===----------------------------------------------------------------------===//

/// A linear layer with a bias as the patterns read it: one slapo.linear
/// with a bias, or a product (slapo.matmul, or a linear without bias) plus a
/// bias row (HF's Conv1D imports as add(bias, matmul)); optionally viewed
/// through a reshape that keeps the last dim (Conv1D's [B*T, N] -> [B, T,
/// N]).
struct BiasedProduct {
  /// The slapo.linear or the slapo.add.
  Operation *biased = nullptr;
  Value bias;
  /// The add's product operand; null for a linear.
  Value product;
  bool biasFirst = false;
  ReshapeOp reshape;
};

/// Whether `value` is a product without bias: a matmul's or a bias-less
/// linear's, possibly viewed through reshapes that keep the last dim,
/// summed over tp ranks (a row-parallel layer adds its bias after the
/// all-reduce) and widened (mixed precision's bf16 product).
bool isProduct(Value value) {
  Operation *producer = value.getDefiningOp();
  while (producer && producer->getNumOperands() == 1 &&
         ((isa<AllReduceOp>(producer) && producer->getNumResults() == 1) ||
          isWideningCast(producer) ||
          (isa<ReshapeOp>(producer) && rankOf(producer->getOperand(0)) > 0 &&
           shapeOf(producer->getOperand(0)).back() ==
               shapeOf(producer->getResult(0)).back())))
    producer = producer->getOperand(0).getDefiningOp();
  auto linear = dyn_cast_or_null<LinearOp>(producer);
  return isa_and_nonnull<MatmulOp>(producer) || (linear && !linear.getBias());
}

/// Whether `add` adds a row of its last dim to a product: sets `match`.
bool matchBiasAdd(AddOp add, BiasedProduct &match) {
  ArrayRef<int64_t> shape = shapeOf(add.getResult());
  for (bool biasFirst : {true, false}) {
    Value bias = biasFirst ? add.getLhs() : add.getRhs();
    Value product = biasFirst ? add.getRhs() : add.getLhs();
    if (shape.empty() || shapeOf(bias) != shape.take_back() ||
        shapeOf(product) != shape || !isProduct(product))
      continue;
    match = {add, bias, product, biasFirst, ReshapeOp()};
    return true;
  }
  return false;
}

/// Matches the linear layer with a bias whose result `reader` reads as
/// `value` (`what` names the reader's role for messages).
FailureOr<BiasedProduct> matchBiasedProduct(Value value, Operation *reader,
                                            StringRef what,
                                            KindMatcher &matcher) {
  BiasedProduct match;
  Operation *producer = value.getDefiningOp();
  if (auto reshape = dyn_cast_or_null<ReshapeOp>(producer);
      reshape && rankOf(reshape.getInput()) > 0 &&
      rankOf(reshape.getResult()) > 0 &&
      shapeOf(reshape.getInput()).back() ==
          shapeOf(reshape.getResult()).back()) {
    match.reshape = reshape;
    producer = reshape.getInput().getDefiningOp();
  }
  if (auto linear = dyn_cast_or_null<LinearOp>(producer);
      linear && linear.getBias()) {
    match.biased = linear;
    match.bias = linear.getBias();
  } else if (auto add = dyn_cast_or_null<AddOp>(producer)) {
    ReshapeOp reshape = match.reshape;
    if (matchBiasAdd(add, match))
      match.reshape = reshape;
  }
  if (!match.biased) {
    if (!producer)
      return matcher.fail(reader, Twine(what) +
                                      " reads an argument of the step, not "
                                      "a linear layer with a bias");
    return matcher.fail(producer, Twine(what) + " reads " +
                                      describeOp(producer) +
                                      ", not a linear layer with a bias "
                                      "(x W^T + b)");
  }
  // The bias add moves after the reshape: nothing else may read the
  // biased product in the reshape's place.
  if (match.reshape)
    for (Operation *user : match.biased->getResult(0).getUsers())
      if (user != match.reshape)
        return matcher.fail(user, "the linear layer's result is also read "
                                  "by " +
                                      describeOp(user) +
                                      ", not only by the reshape " +
                                      Twine(what).str() + " reads");
  return match;
}

/// Splits the bias off a matched linear layer: the product, reshaped if it
/// was, then the bias add of the shape the reader reads, in place of the
/// linear (and reshape). Returns the add.
Operation *splitBias(BiasedProduct &match) {
  Operation *biased = match.biased;
  Operation *replaced =
      match.reshape ? match.reshape.getOperation() : match.biased;
  auto linear = dyn_cast<LinearOp>(biased);
  if (!linear && !match.reshape)
    return biased; // already a product plus a bias, in the reader's shape
  OpBuilder builder(replaced);
  Value product = match.product;
  Operation *widenedBefore = nullptr;
  if (linear) {
    auto unbiased = builder.create<LinearOp>(linear.getLoc(), linear.getType(),
                                             linear.getInput(),
                                             linear.getWeight(), Value());
    unbiased->setAttrs(linear->getAttrDictionary());
    product = unbiased;
  }
  if (match.reshape) {
    // A product widened for the add alone is reshaped narrow and widened
    // after: the cast then runs in the reader's shape, in its loop.
    Operation *widen = product.getDefiningOp();
    bool widenAfter = isWideningCast(widen) && product.hasOneUse();
    Value reshaped = widenAfter ? widen->getOperand(0) : product;
    auto reshape = builder.create<ReshapeOp>(
        match.reshape.getLoc(),
        RankedTensorType::get(shapeOf(match.reshape.getResult()),
                              elementTypeOf(reshaped)),
        reshaped);
    reshape->setAttrs(match.reshape->getAttrDictionary());
    product = reshape;
    if (widenAfter) {
      widenedBefore = widen;
      auto cast = builder.create<CastOp>(
          widen->getLoc(), match.reshape.getType(), reshape.getResult());
      cast->setAttrs(widen->getAttrDictionary());
      product = cast;
    }
  }
  Type type = replaced->getResult(0).getType();
  auto add = builder.create<AddOp>(biased->getLoc(), type,
                                   match.biasFirst ? match.bias : product,
                                   match.biasFirst ? product : match.bias);
  add->setAttrs(biased->getAttrDictionary());
  replaced->getResult(0).replaceAllUsesWith(add.getResult());
  replaced->erase();
  if (replaced != biased)
    biased->erase();
  if (widenedBefore)
    widenedBefore->erase();
  return add;
}

/// Where a module has no op that reads a linear layer with a bias as the
/// pattern's `expected` op: what its first linear layer with a bias is read
/// by instead (past a reshape), or that it has none.
LogicalResult reportBiasedProductReader(ArrayRef<Operation *> forward,
                                        StringRef expected, StringRef advice,
                                        KindMatcher &matcher, Operation *&at) {
  for (Operation *op : forward) {
    BiasedProduct biased;
    auto linear = dyn_cast<LinearOp>(op);
    auto add = dyn_cast<AddOp>(op);
    if (!(linear && linear.getBias()) && !(add && matchBiasAdd(add, biased)))
      continue;
    SmallVector<Operation *> readers = getReadersInComputation(op);
    Operation *reader = readers.empty() ? op : readers.front();
    if (auto reshape = dyn_cast<ReshapeOp>(reader)) {
      SmallVector<Operation *> next = getReadersInComputation(reshape);
      if (!next.empty())
        reader = next.front();
    }
    at = op;
    if (reader == op)
      return matcher.fail(op, "the linear layer's result is read by no op "
                              "of the forward");
    return matcher.fail(reader, "the linear layer's result is read by " +
                                    describeOp(reader) + ", not by '" +
                                    expected + "'" + advice);
  }
  return matcher.fail(nullptr, "it computes no linear layer with a bias");
}

LogicalResult prepareBiasGelu(KindMatcher &matcher, Operation *&at) {
  SmallVector<Operation *> forward;
  FailureOr<SmallVector<GeluOp>> gelus = matcher.collect<GeluOp>(forward, at);
  if (failed(gelus))
    return success(); // on another pipeline stage
  if (gelus->empty())
    return reportBiasedProductReader(forward, "slapo.gelu", "", matcher, at);
  for (GeluOp gelu : *gelus) {
    at = gelu;
    FailureOr<BiasedProduct> match =
        matchBiasedProduct(gelu.getInput(), gelu, "the gelu", matcher);
    if (failed(match)) {
      // A recomputation is its forward's copy: it differs only where the
      // forward did, which is reported.
      if (isRecomputed(gelu))
        continue;
      return failure();
    }
    Operation *add = splitBias(*match);
    matcher.addMatched(add);
    matcher.addMatched(gelu);
    // Megatron's backward adds the bias again in gelu's gradient: the
    // forward's group writes the gelu alone.
    for (Operation *user : llvm::to_vector(add->getResult(0).getUsers()))
      if (auto grad = dyn_cast<GeluGradOp>(user);
          grad && grad.getInput() == add->getResult(0) &&
          !isSameComputation(add, grad))
        matcher.members.insert(computeAgainFor(add, grad));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// bias_dropout_add
//===----------------------------------------------------------------------===//

/// The one reader of `op`'s result in its computation, an op of type OpT in
/// `module` whose result has `op`'s shape, or a mismatch saying which
/// differs (`role` names what OpT does, for messages).
template <typename OpT>
FailureOr<OpT> matchOnlyReader(Operation *op, StringRef what, StringRef role,
                               KindMatcher &matcher) {
  SmallVector<Operation *> readers = getReadersInComputation(op);
  if (readers.empty())
    return matcher.fail(op, Twine(what) + "'s result is read by no op of "
                                          "the forward");
  auto reader = dyn_cast<OpT>(readers[0]);
  if (!reader)
    return matcher.fail(readers[0], Twine(what) + "'s result is read by " +
                                        describeOp(readers[0]) + ", not by " +
                                        role);
  if (readers.size() > 1)
    return matcher.fail(readers[1], Twine(what) +
                                        "'s result is also read "
                                        "by " +
                                        describeOp(readers[1]) +
                                        ": the group keeps it for " + role +
                                        " alone");
  if (shapeOf(reader->getResult(0)) != shapeOf(op->getResult(0)))
    return matcher.fail(reader, Twine(what) + " broadcasts to " +
                                    shapeString(shapeOf(reader->getResult(0))) +
                                    " in " + role);
  if (!isInModule(reader, matcher.module))
    return matcher.fail(reader, "the " + Twine(role) + " is in module '" +
                                    getModulePath(reader) + "', outside '" +
                                    matcher.module +
                                    "': select the module that holds both");
  return reader;
}

LogicalResult prepareBiasDropoutAdd(KindMatcher &matcher, Operation *&at) {
  SmallVector<Operation *> forward;
  FailureOr<SmallVector<DropoutOp>> dropouts =
      matcher.collect<DropoutOp>(forward, at);
  if (failed(dropouts))
    return success(); // on another pipeline stage
  // The module's other dropouts (of attention probabilities) are not the
  // pattern's: the dropouts of linear layers with a bias are.
  bool any = false;
  for (DropoutOp dropout : *dropouts) {
    Mismatch ignored;
    KindMatcher probe(matcher.step, matcher.module, matcher.members, ignored);
    if (failed(matchBiasedProduct(dropout.getInput(), dropout, "the dropout",
                                  probe)))
      continue;
    at = dropout;
    FailureOr<BiasedProduct> match =
        matchBiasedProduct(dropout.getInput(), dropout, "the dropout", matcher);
    FailureOr<AddOp> residual = failure();
    if (succeeded(match))
      residual = matchOnlyReader<AddOp>(dropout, "the dropout",
                                        "the residual add", matcher);
    if (failed(residual)) {
      if (isRecomputed(dropout))
        continue;
      return failure();
    }
    any |= isForwardOp(dropout);
    matcher.addMatched(splitBias(*match));
    matcher.addMatched(dropout);
    matcher.addMatched(*residual);
  }
  if (!any)
    return reportBiasedProductReader(
        forward, "slapo.dropout",
        " (a dropout in train mode with p > 0: the importer drops others)",
        matcher, at);
  return success();
}

//===----------------------------------------------------------------------===//
// silu_mul
//===----------------------------------------------------------------------===//

LogicalResult prepareSiluMul(KindMatcher &matcher, Operation *&at) {
  SmallVector<Operation *> forward;
  FailureOr<SmallVector<SiluOp>> silus = matcher.collect<SiluOp>(forward, at);
  if (failed(silus))
    return success(); // on another pipeline stage
  if (silus->empty())
    return matcher.fail(nullptr, "it computes no silu");
  for (SiluOp silu : *silus) {
    at = silu;
    FailureOr<MulOp> product = matchOnlyReader<MulOp>(
        silu, "the silu", "the product with the up projection", matcher);
    if (failed(product)) {
      if (isRecomputed(silu))
        continue;
      return failure();
    }
    matcher.addMatched(silu);
    matcher.addMatched(*product);
    // The product's gradient for the up projection reads the silu: the
    // backward computes it again, and the forward's group writes the
    // product alone.
    for (Operation *user : llvm::to_vector(silu.getResult().getUsers()))
      if (isBackwardOp(user) && user->hasTrait<OpTrait::FusibleElementwise>() &&
          user->getLoc() == (*product)->getLoc())
        matcher.members.insert(computeAgainFor(silu, user));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

struct FuseKind {
  StringRef name;
  /// What the module computes, for messages.
  StringRef pattern;
  LogicalResult (*prepare)(KindMatcher &, Operation *&at);
};
constexpr FuseKind kFuseKinds[] = {
    {"bias_gelu", "gelu(x W^T + b)", prepareBiasGelu},
    {"bias_dropout_add", "dropout(x W^T + b) + residual",
     prepareBiasDropoutAdd},
    {"silu_mul", "silu(gate) * up", prepareSiluMul},
};

const FuseKind *lookupFuseKind(StringRef name) {
  const FuseKind *kind = llvm::find_if(
      kFuseKinds, [&](const FuseKind &known) { return known.name == name; });
  return kind == std::end(kFuseKinds) ? nullptr : kind;
}

} // namespace

ArrayRef<StringRef> getFuseKinds() {
  // Kept here, not in getRegistryNames: a static there would be one per
  // entry type and size, shared by two registries that happened to match.
  static const SmallVector<StringRef> names = getRegistryNames(kFuseKinds);
  return names;
}

StringRef getFuseKindPattern(StringRef kind) {
  const FuseKind *known = lookupFuseKind(kind);
  return known ? known->pattern : StringRef();
}

void sinkBiasAddsPastReshapes(
    func::FuncOp step, function_ref<bool(Operation *)> isElementwiseCandidate) {
  for (ReshapeOp reshape : llvm::to_vector(step.getOps<ReshapeOp>())) {
    auto add = reshape.getInput().getDefiningOp<AddOp>();
    BiasedProduct match;
    if (!add || !add->hasOneUse() || rankOf(reshape.getResult()) == 0 ||
        shapeOf(add.getResult()).back() !=
            shapeOf(reshape.getResult()).back() ||
        !matchBiasAdd(add, match) || !isElementwiseCandidate(add) ||
        llvm::none_of(reshape->getUsers(), isElementwiseCandidate))
      continue;
    match.reshape = reshape;
    splitBias(match);
  }
}

/// The ops that compute `op`'s f32 value from a bf16 tensor of its shape,
/// in order, or none: a widening cast (mixed precision's bf16 product), or
/// an add of one and an operand of fewer elements (a bias row: a linear
/// layer's output before its activation, GPT-2's c_fc before the gelu).
SmallVector<Operation *, 2> getWidenedChain(Operation *op) {
  if (isWideningCast(op))
    return {op};
  auto add = dyn_cast<AddOp>(op);
  if (!add)
    return {};
  int64_t elements = add.getType().cast<RankedTensorType>().getNumElements();
  for (auto [widened, row] : {std::pair(add.getLhs(), add.getRhs()),
                              std::pair(add.getRhs(), add.getLhs())}) {
    Operation *cast = widened.getDefiningOp();
    if (isWideningCast(cast) && widened.getType() == add.getType() &&
        isSameComputation(cast, add) &&
        row.getType().cast<RankedTensorType>().getNumElements() < elements)
      return {cast, add};
  }
  return {};
}

void widenAgainInEachComputation(func::FuncOp step,
                                 function_ref<bool(Operation *)> mayFuse,
                                 SmallVectorImpl<Operation *> &copies) {
  for (Operation *op :
       llvm::to_vector(llvm::make_pointer_range(step.getBody().front()))) {
    SmallVector<Operation *, 2> chain = getWidenedChain(op);
    if (chain.empty())
      continue;
    // A copy for each reader in another computation that a fusion group
    // may hold, right before it: readers that end up in one group read
    // the bf16 tensor once, and each group widens it itself.
    SmallVector<Operation *> readers;
    for (Operation *user : op->getUsers())
      if (!isSameComputation(op, user) && mayFuse(user) &&
          !llvm::is_contained(readers, user))
        readers.push_back(user);
    for (Operation *reader : readers) {
      IRMapping mapping;
      for (Operation *member : chain) {
        copies.push_back(cloneFor(member, reader, mapping));
        mapping.map(member->getResult(0), copies.back()->getResult(0));
      }
      reader->replaceUsesOfWith(op->getResult(0), copies.back()->getResult(0));
    }
  }
}

LogicalResult prepareFuseKind(StringRef kind, func::FuncOp step,
                              StringRef module,
                              SmallPtrSetImpl<Operation *> &members,
                              Mismatch &mismatch, Operation *&at) {
  const FuseKind *known = lookupFuseKind(kind);
  KindMatcher matcher(step, module, members, mismatch);
  at = nullptr;
  if (!known || failed(known->prepare(matcher, at)))
    return failure();
  matcher.addGradients();
  matcher.addWideningCasts();
  matcher.addNarrowingCasts();
  return success();
}

} // namespace slapo
