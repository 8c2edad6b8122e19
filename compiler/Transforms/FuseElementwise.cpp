//===- FuseElementwise.cpp - elementwise chains as fusion groups ----------===//
//
// Each elementwise op alone is a pass over memory: it reads its operands and
// writes its result. A chain of them computed as one loop reads the chain's
// inputs and writes what others read, once. The groups are found on the
// whole training step, forward, backward and optimizer, where every reader
// of every value is known, and before the memory plan, which then gives the
// values a group keeps to itself no bytes at all.
//
// A group whose loop is [rows, C] also holds the reductions and softmaxes
// along C that its chain reaches (FusibleRowOpInterface: scale, mask and
// softmax; a softmax's gradient with its row sum in the middle), and the
// elementwise ops on their row values: the emitter computes it row by row.
//
// A group without row ops also holds the column sums of its values and of
// the inputs it reads whole (a bias gradient: slapo.sum over every dim but
// the last, possibly of a reshape that keeps the last dim, which keeps the
// rows' order): the emitter adds each row to the sums as it computes it, in
// the reduce kernel's order, and a summed value that nothing else reads is
// never written.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "FusionKinds.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace slapo {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

RankedTensorType tensorType(Value value) {
  return value.getType().cast<RankedTensorType>();
}

/// Ops of one phase and recomputation, computing one loop's shape, or its
/// rows' (the loop's shape with the last dim 1) in a group with row ops.
struct Group {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 8> members;
  SmallVector<int64_t> loop;
  /// Column sums of the group's values (`summed`, a member's result that
  /// `sum` reads directly or through a reshape that keeps the last dim).
  struct ColumnSum {
    SumOp sum;
    Value summed;
  };
  SmallVector<ColumnSum> columnSums;

  bool hasRowOps() const {
    return llvm::any_of(
        ops, [](Operation *op) { return isa<FusibleRowOpInterface>(op); });
  }
};

/// The shape of the loop that computes `op`: a row op's input's.
ArrayRef<int64_t> getLoopShape(Operation *op) {
  if (isa<FusibleRowOpInterface>(op))
    return tensorType(op->getOperand(0)).getShape();
  return tensorType(op->getResult(0)).getShape();
}

/// The shape of a row value of a loop over `loop` (non-empty).
SmallVector<int64_t> getRowShape(ArrayRef<int64_t> loop) {
  SmallVector<int64_t> row(loop);
  row.back() = 1;
  return row;
}

/// The longest module path that holds `a` and `b`: whole components only.
StringRef getCommonModule(StringRef a, StringRef b) {
  size_t common = 0;
  for (size_t i = 0; i <= std::min(a.size(), b.size()); ++i) {
    bool endA = i == a.size() || a[i] == '.';
    bool endB = i == b.size() || b[i] == '.';
    if (endA && endB)
      common = i;
    if (i == a.size() || i == b.size() || a[i] != b[i])
      break;
  }
  return a.take_front(common);
}

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>(kTrainStepName);
    if (!step) {
      getOperation().emitError("slapo-fuse-elementwise needs @")
          << kTrainStepName << " (run slapo-optimizer first)";
      return signalPassFailure();
    }
    if (!kind.empty() && failed(prepareKind(step)))
      return signalPassFailure();
    if (kind.empty())
      sinkBiasAddsPastReshapes(step,
                               [&](Operation *op) { return isCandidate(op); });
    // After the kind's preparation, which says which ops its groups may
    // hold (those then hold the copies too), and after the bias adds moved
    // to their readers' shape.
    SmallVector<Operation *> copies;
    widenAgainInEachComputation(
        step, [&](Operation *op) { return isCandidate(op); }, copies);
    if (!kind.empty())
      kindOps.insert(copies.begin(), copies.end());
    std::vector<Group> groups = findGroups(step.getBody().front());
    if (kind.empty())
      addColumnSums(step.getBody().front(), groups);
    for (Group &group : groups)
      if (group.ops.size() + group.columnSums.size() > 1)
        buildFusedOp(group);
  }

  /// fuse(kind): checks that every module computes the kind's pattern and
  /// collects the ops its groups may hold.
  LogicalResult prepareKind(func::FuncOp step) {
    if (getFuseKindPattern(kind).empty()) {
      getOperation().emitError("slapo-fuse-elementwise: unknown kind '")
          << kind << "' (known: " << llvm::join(getFuseKinds(), ", ") << ")";
      return failure();
    }
    if (modules.empty()) {
      getOperation().emitError("slapo-fuse-elementwise: kind=")
          << kind << " needs the modules that compute it";
      return failure();
    }
    for (const std::string &module : modules) {
      Mismatch mismatch;
      Operation *at = nullptr;
      if (succeeded(prepareFuseKind(kind, step, module, kindOps, mismatch, at)))
        continue;
      InFlightDiagnostic error = emitError(getPrimitiveLocation(at, *this))
                                 << "fuse(\"" << kind << "\"): module '"
                                 << module << "' does not compute "
                                 << getFuseKindPattern(kind) << ": "
                                 << mismatch.message;
      if (mismatch.op)
        error.attachNote(getModelLocation(mismatch.op))
            << "the op that differs";
      return failure();
    }
    return success();
  }

  /// Whether `op` may be in a group at all.
  bool isCandidate(Operation *op) {
    if (!isLoopFusible(op))
      return false;
    bool rowOp = isa<FusibleRowOpInterface>(op);
    // The emitted loops compute in f32 or f64. Mixed precision's casts
    // between f32 and bf16 join f32 chains: the loop reads or writes that
    // tensor in bf16 with the cast kernel's conversion, so a chain that a bf16
    // product reads (no reshape between them) writes its bf16 operand itself.
    Type element = tensorType(op->getResult(0)).getElementType();
    if (auto cast = dyn_cast<CastOp>(op)) {
      Type from = tensorType(cast.getInput()).getElementType();
      if (!(from.isF32() && element.isBF16()) &&
          !(from.isBF16() && element.isF32()))
        return false;
    } else if (!element.isF32() && !element.isF64()) {
      return false;
    } else if (rowOp &&
               tensorType(op->getOperand(0)).getElementType() != element) {
      // A sum into a wider type (slapo-propagate-casts): not a loop's row.
      return false;
    }
    // A loop draws a dropout's mask by the element's index, which is its
    // counter where the tensor is not split over tp ranks; and with the
    // step's number, which the step's dropouts have.
    if (auto dropout = dyn_cast<DropoutOp>(op);
        dropout && (!dropout.getStep() || dropout.getShardAxis()))
      return false;
    // A row op reads its loop's shape; an elementwise op's operands
    // broadcast to its result.
    ArrayRef<int64_t> loop = tensorType(op->getResult(0)).getShape();
    if (!rowOp && llvm::any_of(op->getOperands(), [&](Value operand) {
          return !getBroadcastIndexing(tensorType(operand).getShape(), loop);
        }))
      return false;
    if (!kind.empty())
      return kindOps.contains(op);
    return isInSelectedModules(op);
  }

  /// Whether `op` is in one of the pass's `modules` (all ops without any).
  bool isInSelectedModules(Operation *op) {
    return modules.empty() || llvm::any_of(modules, [&](StringRef module) {
             return isInModule(op, module);
           });
  }

  /// Whether `op` may join `group`: same loop (or the loop's rows, for an
  /// elementwise op on row values), phase, microbatch, block of a
  /// module list and recomputation (a group of two microbatches' ops would
  /// keep the first's values live until the last's, as the gradient sums
  /// would all of them; one across two blocks, the residual add of one and
  /// the dropout of the next, would make the blocks differ, which the
  /// emitter then cannot write as one function), and
  /// no reader of the group's values outside it before `op` (the group is
  /// built where its last op is, and its results must be there before they
  /// are read).
  bool canJoin(Group &group, Operation *op) {
    ArrayRef<int64_t> shape = tensorType(op->getResult(0)).getShape();
    bool onRows = !isa<FusibleRowOpInterface>(op) && !group.loop.empty() &&
                  group.loop.back() > 1 &&
                  shape == ArrayRef(getRowShape(group.loop));
    if ((getLoopShape(op) != ArrayRef(group.loop) && !onRows) ||
        !isInSamePart(group, op))
      return false;
    for (Operation *member : group.ops)
      for (Operation *user : member->getUsers())
        if (user != op && !group.members.contains(user) &&
            !op->isBeforeInBlock(user))
          return false;
    return true;
  }

  /// Whether `op` runs in the same computation of the step (phase,
  /// recomputation, microbatch) and block of a module list as `group`'s ops.
  static bool isInSamePart(Group &group, Operation *op) {
    Operation *first = group.ops.front();
    return isSameComputation(first, op) && getBlockPath(getModulePath(first)) ==
                                               getBlockPath(getModulePath(op));
  }

  /// Gives each group without row ops the column sums of its values (of its
  /// loop's shape: every value of such a group) that run in its part of the
  /// step, and of its inputs (getReader). The sums of values read a member,
  /// directly or through a reshape, so they come after the group's last op
  /// (canJoin: no outside reader is before it), where the group is built.
  void addColumnSums(Block &block, std::vector<Group> &groups) {
    DenseMap<Operation *, Group *> groupOf;
    for (Group &group : groups)
      if (!group.hasRowOps())
        for (Operation *op : group.ops)
          groupOf[op] = &group;
    for (SumOp sum : block.getOps<SumOp>()) {
      if (!isColumnSum(sum) || !isInSelectedModules(sum))
        continue;
      // A reshape that keeps the last dim keeps the rows' order: the sum
      // over its leading dims is the sum over the value's.
      Value summed = sum.getInput();
      if (auto reshape = summed.getDefiningOp<ReshapeOp>())
        if (tensorType(reshape.getInput()).getRank() >= 2 &&
            tensorType(reshape.getInput()).getShape().back() ==
                tensorType(summed).getShape().back())
          summed = reshape.getInput();
      Group *group = groupOf.lookup(summed.getDefiningOp());
      if (!group)
        group = getReader(groups, summed, sum);
      if (group && isInSamePart(*group, sum))
        group->columnSums.push_back({sum, summed});
    }
  }

  /// A group without row ops that reads `summed` whole (of its loop's
  /// shape) and whose last op comes before `sum`, or null: the column sums
  /// of an input come with the group's reads of it (the residual stream's
  /// gradient, cast to bf16 for a product and summed for its bias).
  static Group *getReader(std::vector<Group> &groups, Value summed, SumOp sum) {
    for (Group &group : groups)
      if (!group.ops.empty() && !group.hasRowOps() &&
          ArrayRef(group.loop) == tensorType(summed).getShape() &&
          group.ops.back()->isBeforeInBlock(sum) &&
          llvm::any_of(summed.getUsers(), [&](Operation *user) {
            return group.members.contains(user);
          }))
        return &group;
    return nullptr;
  }

  std::vector<Group> findGroups(Block &block) {
    std::vector<Group> groups;
    DenseMap<Operation *, size_t> groupOf;
    for (Operation &op : block) {
      if (!isCandidate(&op))
        continue;
      // The latest producer's group: the one a chain continues.
      std::optional<size_t> chosen;
      for (Value operand : op.getOperands()) {
        auto it = groupOf.find(operand.getDefiningOp());
        if (it == groupOf.end() || (chosen && *chosen >= it->second))
          continue;
        if (canJoin(groups[it->second], &op))
          chosen = it->second;
      }
      if (!chosen) {
        chosen = groups.size();
        groups.emplace_back();
        groups.back().loop = llvm::to_vector(getLoopShape(&op));
      } else {
        for (Value operand : op.getOperands()) {
          auto it = groupOf.find(operand.getDefiningOp());
          if (it != groupOf.end() && it->second != *chosen &&
              isFeederOf(groups[it->second], groups[*chosen], &op))
            absorb(groups[it->second], *chosen, groups, groupOf);
        }
      }
      groups[*chosen].ops.push_back(&op);
      groups[*chosen].members.insert(&op);
      groupOf[&op] = *chosen;
    }
    return groups;
  }

  /// Whether `feeder`, another group than `group`, computes what `op`
  /// (joining `group`) reads in `group`'s loop and part of the step, and
  /// nothing that an op before `op` reads: two chains that meet in `op` (a
  /// product's bf16 operands widened, then multiplied) are then one loop,
  /// placed at `op`, after all their inputs (as canJoin places a group).
  bool isFeederOf(Group &feeder, Group &group, Operation *op) {
    if (feeder.ops.empty() || feeder.loop != group.loop || feeder.hasRowOps() ||
        group.hasRowOps() || !isInSamePart(group, feeder.ops.front()))
      return false;
    return llvm::all_of(feeder.ops, [&](Operation *member) {
      return llvm::all_of(member->getUsers(), [&](Operation *user) {
        return user == op || feeder.members.contains(user) ||
               op->isBeforeInBlock(user);
      });
    });
  }

  /// Moves `feeder`'s ops into the group `into`, leaving `feeder` empty.
  void absorb(Group &feeder, size_t into, std::vector<Group> &groups,
              DenseMap<Operation *, size_t> &groupOf) {
    for (Operation *member : feeder.ops) {
      groups[into].ops.push_back(member);
      groups[into].members.insert(member);
      groupOf[member] = into;
    }
    feeder.ops.clear();
    feeder.members.clear();
  }

  void buildFusedOp(Group &group) {
    Operation *last = group.ops.back();
    // The column sums, and the reshapes that only they read, are computed
    // by the group: their readers are not the group's.
    llvm::SmallPtrSet<Operation *, 4> absorbed;
    for (Group::ColumnSum columnSum : group.columnSums)
      absorbed.insert(columnSum.sum);
    for (Group::ColumnSum columnSum : group.columnSums)
      if (Operation *reshape = columnSum.sum.getInput().getDefiningOp();
          reshape != columnSum.summed.getDefiningOp() &&
          llvm::all_of(reshape->getUsers(), [&](Operation *user) {
            return absorbed.contains(user);
          }))
        absorbed.insert(reshape);
    llvm::SetVector<Value> inputs;
    SmallVector<Value> results;
    SmallVector<Location> locations;
    StringRef module = getModulePath(group.ops.front());
    for (Operation *op : group.ops) {
      for (Value operand : op->getOperands())
        if (!group.members.contains(operand.getDefiningOp()))
          inputs.insert(operand);
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !group.members.contains(user) && !absorbed.contains(user);
            }))
          results.push_back(result);
      locations.push_back(op->getLoc());
      module = getCommonModule(module, getModulePath(op));
    }
    for (Group::ColumnSum columnSum : group.columnSums) {
      results.push_back(columnSum.sum);
      locations.push_back(columnSum.sum.getLoc());
      module = getCommonModule(module, getModulePath(columnSum.sum));
    }
    // Values nobody reads (none after CSE) need no loop.
    if (results.empty())
      return;

    OpBuilder builder(last);
    builder.setInsertionPointAfter(last);
    auto fused = builder.create<FusedOp>(
        FusedLoc::get(&getContext(), locations), ValueRange(results).getTypes(),
        inputs.getArrayRef());
    setModulePath(fused, module);
    if (!kind.empty())
      fused.setKindAttr(builder.getStringAttr(kind));
    // The members agree on these (canJoin); the memory plan and the
    // pipeline schedule read them from the group as from its ops.
    for (StringRef name :
         {kPhaseAttrName, kRecomputedAttrName, kMicrobatchAttrName})
      if (Attribute value = last->getAttr(name))
        fused->setAttr(name, value);

    Block *body = builder.createBlock(&fused.getBody());
    IRMapping mapping;
    for (Value input : inputs)
      mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
    for (Operation *op : group.ops)
      builder.clone(*op, mapping);
    // A sum of a reshape becomes the sum of the value over its leading dims.
    for (Group::ColumnSum columnSum : group.columnSums) {
      mapping.map(columnSum.sum.getInput(), mapping.lookup(columnSum.summed));
      auto sum = cast<SumOp>(builder.clone(*columnSum.sum, mapping));
      sum.setDims(llvm::to_vector(
          llvm::seq<int64_t>(0, tensorType(columnSum.summed).getRank() - 1)));
    }
    SmallVector<Value> yielded;
    for (Value result : results)
      yielded.push_back(mapping.lookup(result));
    builder.create<YieldOp>(last->getLoc(), yielded);

    for (auto [result, replacement] : llvm::zip(results, fused.getResults()))
      result.replaceAllUsesExcept(replacement, group.members);
    for (Group::ColumnSum columnSum : group.columnSums)
      columnSum.sum->erase();
    for (Operation *op : absorbed)
      if (isa<ReshapeOp>(op))
        op->erase();
    for (Operation *op : llvm::reverse(group.ops))
      op->erase();
  }

  /// With a kind: the ops its groups may hold.
  llvm::SmallPtrSet<Operation *, 32> kindOps;
};

} // namespace
} // namespace slapo
