//===- PlanMemory.cpp - one arena for every tensor of the step ------------===//
//
// The step is one block with static shapes, so every tensor's size and
// lifetime are known at compile time: the rank program allocates one arena
// once and never calls an allocator while it trains. Values that share bytes
// (a reshape and its input, a get_param and its parameter) form one buffer
// whose lifetime is the union of theirs.
//
// With microbatches the plan follows the order the step runs them in: a
// microbatch's activations live from its forward to its backward, so a
// pipeline stage in 1F1B order holds those of the microbatches in flight
// (at most pp - stage of them), and a later microbatch's take the bytes of
// an earlier one whose backward has run. The summary counts them.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

namespace slapo {
#define GEN_PASS_DEF_PLANMEMORY
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

enum class Category { Gradient, Activation, Temporary, Workspace };
constexpr int kCategories = 4;

/// A set of values sharing bytes, and when any of them is live.
struct Buffer {
  int64_t bytes = 0;
  int64_t firstUse = 0, lastUse = 0; // op indices, inclusive
  int64_t offset = -1;
  bool persistent = false;
  Category category = Category::Temporary;
  /// The microbatch whose forward computed it, or -1.
  int64_t microbatch = -1;
};

class Planner {
public:
  Planner(ModuleOp module, func::FuncOp step) : module(module), step(step) {}
  void run();

private:
  /// The value whose buffer `value` shares, following reshapes and other
  /// ops that keep their operand's bytes.
  Value getRoot(Value value);
  void collectBuffers();
  void placePersistent();
  void placeTransient();
  void annotate();

  ModuleOp module;
  func::FuncOp step;
  DenseMap<Operation *, int64_t> index;
  /// By root value; a get_param's root is its result, placed at its param.
  llvm::MapVector<Value, Buffer> buffers;
  /// The workspaces of the ops that need one, by op.
  llvm::MapVector<Operation *, Buffer> workspaces;
  DenseMap<StringAttr, int64_t> symbolOffsets;
  int64_t persistentEnd = 0, arenaEnd = 0;
  int64_t weights = 0, optimizerState = 0, inputs = 0, constants = 0;
  int64_t peak[kCategories] = {};
  /// The index of each microbatch's last op: its last backward op, or the
  /// last of its forward on a stage whose backward has none.
  DenseMap<int64_t, int64_t> lastOpOfMicrobatch;
  /// The microbatches of the step, and the most of them whose activations
  /// are live at once (both 0 without microbatches).
  int64_t microbatches = 0, microbatchesInFlight = 0;
  /// The most activation bytes live at once, at the peak or elsewhere.
  int64_t mostActivations = 0;
};

Value Planner::getRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    Value source = getSameBytesSource(def);
    if (!source)
      break;
    value = source;
  }
  return value;
}

void Planner::collectBuffers() {
  Block &block = step.getBody().front();
  for (auto [i, op] : llvm::enumerate(block))
    index[&op] = i;
  int64_t end = block.getOperations().size();
  auto extend = [&](Value value, int64_t first, int64_t last) {
    Buffer &buffer = buffers[getRoot(value)];
    if (!buffer.bytes) {
      buffer.bytes = getStorageBytes(getRoot(value).getType());
      buffer.firstUse = first;
      buffer.lastUse = last;
    }
    buffer.firstUse = std::min(buffer.firstUse, first);
    buffer.lastUse = std::max(buffer.lastUse, last);
    return &buffer;
  };
  auto lastUseOf = [&](Value value, int64_t defined) {
    int64_t last = defined;
    for (Operation *user : value.getUsers())
      last = std::max(last, isa<func::ReturnOp>(user) ? end : index[user]);
    return last;
  };
  for (BlockArgument arg : block.getArguments())
    extend(arg, 0, end)->persistent = true;
  for (Operation &op : block) {
    for (Value result : op.getResults()) {
      Buffer *buffer =
          extend(result, index[&op], lastUseOf(result, index[&op]));
      if (isa<GetParamOp, ConstantOp>(op))
        buffer->persistent = true;
    }
    auto withWorkspace = dyn_cast<WorkspaceOpInterface>(op);
    if (!withWorkspace || !withWorkspace.getWorkspaceBytes())
      continue;
    Buffer &workspace = workspaces[&op];
    workspace.bytes = withWorkspace.getWorkspaceBytes();
    workspace.firstUse = workspace.lastUse = index[&op];
    workspace.category = Category::Workspace;
  }
  // Categories of transient buffers, from what their root is.
  int64_t lastForward = 0;
  for (Operation &op : block.without_terminator())
    if (isForwardOp(&op) && !isa<ConstantOp>(op))
      lastForward = index[&op];
  for (auto &[root, buffer] : buffers) {
    Operation *def = root.getDefiningOp();
    if (buffer.persistent || !def)
      continue;
    if (isForwardOp(def) && buffer.lastUse > lastForward)
      buffer.category = Category::Activation;
  }
  // With microbatches a microbatch's backward reads its activations before
  // the next microbatch's forward runs: past no last forward op.
  if (interleavesForwardAndBackward(step))
    for (Operation &op : block)
      for (Value result : op.getResults()) {
        Value root = getRoot(result);
        Buffer &buffer = buffers[root];
        Operation *def = root.getDefiningOp();
        bool readByBackward =
            llvm::any_of(result.getUsers(), [](Operation *user) {
              return !isa<func::ReturnOp>(user) && !isForwardOp(user);
            });
        if (!buffer.persistent && def && isForwardOp(def) && readByBackward)
          buffer.category = Category::Activation;
      }
  for (auto grad : block.getOps<ParamGradOp>())
    buffers[getRoot(grad.getGrad())].category = Category::Gradient;
  for (Operation &op : block)
    if (auto microbatch = op.getAttrOfType<IntegerAttr>(kMicrobatchAttrName))
      lastOpOfMicrobatch[microbatch.getInt()] = index[&op];
  microbatches = lastOpOfMicrobatch.size();
  for (auto &[root, buffer] : buffers)
    if (Operation *def = root.getDefiningOp())
      if (auto microbatch =
              def->getAttrOfType<IntegerAttr>(kMicrobatchAttrName))
        buffer.microbatch = microbatch.getInt();
}

void Planner::placePersistent() {
  int64_t offset = 0;
  auto place = [&](int64_t bytes) {
    int64_t at = offset;
    offset = alignUp(offset + bytes);
    return at;
  };
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      symbolOffsets[param.getSymNameAttr()] =
          place(getStorageBytes(param.getType()));
      weights += getStorageBytes(param.getType());
    } else if (auto state = dyn_cast<OptimizerStateOp>(op)) {
      symbolOffsets[state.getSymNameAttr()] =
          place(getStorageBytes(state.getType()));
      optimizerState += getStorageBytes(state.getType());
    }
  }
  for (auto &[root, buffer] : buffers) {
    if (!buffer.persistent)
      continue;
    if (auto getParam = root.getDefiningOp<GetParamOp>()) {
      buffer.offset = symbolOffsets.lookup(getParam.getNameAttr().getAttr());
      continue;
    }
    buffer.offset = place(buffer.bytes);
    (root.isa<BlockArgument>() ? inputs : constants) += buffer.bytes;
  }
  persistentEnd = offset;
}

void Planner::placeTransient() {
  SmallVector<Buffer *> order;
  for (auto &entry : buffers)
    if (!entry.second.persistent)
      order.push_back(&entry.second);
  for (auto &entry : workspaces)
    order.push_back(&entry.second);
  llvm::stable_sort(order, [](const Buffer *a, const Buffer *b) {
    return a->bytes > b->bytes;
  });
  SmallVector<Buffer *> placed;
  arenaEnd = persistentEnd;
  for (Buffer *buffer : order) {
    // The live-at-the-same-time buffers already placed, by offset: take the
    // first gap that fits.
    SmallVector<Buffer *> overlapping;
    for (Buffer *other : placed)
      if (other->firstUse <= buffer->lastUse &&
          buffer->firstUse <= other->lastUse)
        overlapping.push_back(other);
    llvm::sort(overlapping, [](const Buffer *a, const Buffer *b) {
      return a->offset < b->offset;
    });
    int64_t offset = persistentEnd;
    for (Buffer *other : overlapping) {
      if (offset + buffer->bytes <= other->offset)
        break;
      offset = std::max(offset, alignUp(other->offset + other->bytes));
    }
    buffer->offset = offset;
    arenaEnd = std::max(arenaEnd, alignUp(offset + buffer->bytes));
    placed.push_back(buffer);
  }
  // The breakdown at the op where the transient bytes live together peak.
  int64_t ops = step.getBody().front().getOperations().size();
  int64_t best = -1;
  for (int64_t i = 0; i <= ops; ++i) {
    int64_t live[kCategories] = {};
    llvm::SmallDenseSet<int64_t> inFlight;
    for (Buffer *buffer : order) {
      if (buffer->firstUse > i || i > buffer->lastUse)
        continue;
      live[static_cast<int>(buffer->category)] += buffer->bytes;
      // A microbatch is in flight from its first op to its last while any
      // of its activations is live; its loss, which the next microbatch's
      // ops add to the step's, is no longer one held for its backward.
      if (buffer->category == Category::Activation && buffer->microbatch >= 0 &&
          i <= lastOpOfMicrobatch.lookup(buffer->microbatch))
        inFlight.insert(buffer->microbatch);
    }
    microbatchesInFlight =
        std::max<int64_t>(microbatchesInFlight, inFlight.size());
    mostActivations = std::max(mostActivations, live[1]);
    int64_t total = std::accumulate(live, live + kCategories, int64_t(0));
    if (total > best) {
      best = total;
      std::copy(live, live + kCategories, peak);
    }
  }
}

void Planner::annotate() {
  Builder builder(module.getContext());
  for (Operation &op : module.getBody()->getOperations())
    if (isa<ParamOp, OptimizerStateOp>(op))
      op.setAttr(kOffsetAttrName,
                 builder.getI64IntegerAttr(
                     symbolOffsets.lookup(SymbolTable::getSymbolName(&op))));
  Block &block = step.getBody().front();
  for (BlockArgument arg : block.getArguments())
    step.setArgAttr(arg.getArgNumber(), kOffsetAttrName,
                    builder.getI64IntegerAttr(buffers[arg].offset));
  for (Operation &op : block) {
    if (op.getNumResults() == 0)
      continue;
    SmallVector<int64_t> offsets;
    for (Value result : op.getResults())
      offsets.push_back(buffers[getRoot(result)].offset);
    op.setAttr(kOffsetsAttrName, builder.getDenseI64ArrayAttr(offsets));
  }
  for (auto &[op, workspace] : workspaces)
    op->setAttr(kWorkspaceAttrName, builder.getDenseI64ArrayAttr(
                                        {workspace.offset, workspace.bytes}));
  auto entry = [&](StringRef name, int64_t bytes) {
    return builder.getNamedAttr(name, builder.getI64IntegerAttr(bytes));
  };
  SmallVector<NamedAttribute> summary = {
      entry("arena_bytes", arenaEnd),
      entry("weights", weights),
      entry("optimizer_state", optimizerState),
      entry("inputs", inputs),
      entry("constants", constants),
      entry("gradients", peak[0]),
      entry("activations", peak[1]),
      entry("temporaries", peak[2]),
      entry("workspaces", peak[3])};
  if (microbatches) {
    summary.push_back(entry(kMicrobatchesKey, microbatches));
    summary.push_back(entry(kMicrobatchesInFlightKey, microbatchesInFlight));
    summary.push_back(entry(kActivationsInFlightKey, mostActivations));
  }
  module->setAttr(kMemoryAttrName, builder.getDictionaryAttr(summary));
}

void Planner::run() {
  collectBuffers();
  placePersistent();
  placeTransient();
  annotate();
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    if (failed(planMemory(getOperation())))
      signalPassFailure();
  }
};

} // namespace

bool interleavesForwardAndBackward(func::FuncOp step) {
  bool backward = false;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (op.hasAttr(kMicrobatchAttrName))
      return true;
    if (isForwardOp(&op) && backward && !isa<ConstantOp>(op))
      return true;
    auto phase = op.getAttrOfType<StringAttr>(kPhaseAttrName);
    backward |= phase && phase.getValue() == "backward";
  }
  return false;
}

int64_t getStorageBytes(Type type) {
  auto tensor = type.cast<RankedTensorType>();
  int64_t bits = tensor.getElementTypeBitWidth();
  // i1 is stored as one byte, as PyTorch's bool.
  return tensor.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  if (bytes < 1024 * 1024)
    return llvm::formatv("{0:f1} KiB", bytes / 1024.0).str();
  if (bytes < 1024 * 1024 * 1024)
    return llvm::formatv("{0:f1} MiB", bytes / (1024.0 * 1024.0)).str();
  return llvm::formatv("{0:f2} GiB", bytes / (1024.0 * 1024.0 * 1024.0)).str();
}

LogicalResult planMemory(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>(kTrainStepName);
  if (!step || !step.getBody().hasOneBlock())
    return module.emitError(
               "slapo-plan-memory: there is no one-block func.func @")
           << kTrainStepName << " (run slapo-optimizer first)";
  Planner(module, step).run();
  return success();
}

std::unique_ptr<Pass> createPlanMemoryPass() {
  return std::make_unique<PlanMemoryPass>();
}

} // namespace slapo
