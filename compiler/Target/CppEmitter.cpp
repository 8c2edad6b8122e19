//===- CppEmitter.cpp - a rank's training step as C++ ---------------------===//
//
// The generated code is meant to be read: each tensor is a named view at its
// planned arena offset, declared where a phase first uses it, and each kernel
// call is preceded by the module path it comes from. Identifiers are built
// from a value's number and the op's name only; model names (parameters,
// inputs, module paths) are data, escaped by quoteForCpp.
//
// The blocks of a module list (transformer.h.0 ... transformer.h.11) mostly
// compute the same thing on their own tensors: the calls of such a block,
// written with its views' offsets (and its dropouts' streams) left open
// (`at[slot]`), are the same text for each. Each distinct text becomes one
// function, called per block with its row of a table of those numbers; the
// code grows with the distinct blocks, not with the layers. The functions are
// a translation unit of their own (blocks.cpp), compiled beside step.cpp.
//
//===----------------------------------------------------------------------===//
#include "slapo/Target/CppEmitter.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <cmath>
#include <numeric>
#include <utility>

using namespace mlir;

namespace slapo {

std::string getProgramFingerprint(ModuleOp module) {
  std::string ir;
  llvm::raw_string_ostream irStream(ir);
  module->print(irStream, OpPrintingFlags().enableDebugInfo(false));
  return llvm::utohexstr(llvm::xxHash64(irStream.str()), /*LowerCase=*/true,
                         /*Width=*/16);
}

std::string quoteForCpp(StringRef text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (llvm::isAlnum(c) || StringRef("._/-: ").contains(c)) {
      quoted += c;
      continue;
    }
    quoted += '\\';
    quoted += char('0' + ((c >> 6) & 7));
    quoted += char('0' + ((c >> 3) & 7));
    quoted += char('0' + (c & 7));
  }
  return quoted + "\"";
}

namespace {

/// The runtime's DType enumerator of an element type.
FailureOr<StringRef> getDType(Type elementType) {
  if (elementType.isF32())
    return StringRef("DType::F32");
  if (elementType.isF64())
    return StringRef("DType::F64");
  if (elementType.isBF16())
    return StringRef("DType::BF16");
  if (elementType.isF16())
    return StringRef("DType::F16");
  if (elementType.isInteger(1))
    return StringRef("DType::Bool");
  if (elementType.isInteger(8))
    return StringRef("DType::I8");
  if (elementType.isInteger(32))
    return StringRef("DType::I32");
  if (elementType.isInteger(64))
    return StringRef("DType::I64");
  return failure();
}

/// "{8, 32}", the brace-initializer of a runtime Shape.
std::string shapeInitializer(ArrayRef<int64_t> shape) {
  std::string text = "{";
  for (auto [i, size] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(size);
  return text + "}";
}

/// "std::array<int64_t, 2>{1, 0}.data()": a kernel's int64_t array argument,
/// alive until the end of the call.
std::string int64Array(ArrayRef<int64_t> values) {
  return llvm::formatv("std::array<int64_t, {0}>{1}.data()", values.size(),
                       shapeInitializer(values))
      .str();
}

/// An exactly-representable C++ double literal.
std::string doubleLiteral(double value) {
  if (std::isnan(value))
    return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<double>::infinity()"
                     : "-std::numeric_limits<double>::infinity()";
  return llvm::formatv("{0}", llvm::format("%.17g", value)).str();
}

/// "Eq" for "eq": enumerators of the runtime are capitalized.
std::string capitalize(StringRef name) {
  std::string text = name.str();
  if (!text.empty())
    text[0] = llvm::toUpper(text[0]);
  return text;
}

/// A bitmask of dims, bit d for dim d, as Kernels.h's reduce takes.
uint32_t dimMask(ArrayRef<int64_t> dims) {
  uint32_t mask = 0;
  for (int64_t dim : dims)
    mask |= 1u << dim;
  return mask;
}

/// "Window2d{{3, 3}, {1, 1}, {1, 1}, {1, 1}}": the runtime's Window2d.
std::string window2d(ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                     ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation) {
  return llvm::formatv("Window2d{{{0}, {1}, {2}, {3}}",
                       shapeInitializer(kernel), shapeInitializer(stride),
                       shapeInitializer(padding), shapeInitializer(dilation))
      .str();
}

/// The [kH, kW] of a convolution's weight [O, C/groups, kH, kW].
ArrayRef<int64_t> kernelOf(Value weight) {
  return weight.getType().cast<RankedTensorType>().getShape().drop_front(2);
}

/// The type of the parameter `name` that `update` updates: its state's
/// too, where its gradient may be narrower (a bf16 gradient of an f32
/// weight).
Type getParamType(Operation *update, FlatSymbolRefAttr name) {
  return SymbolTable::lookupNearestSymbolFrom<ParamOp>(update, name.getAttr())
      .getType();
}

/// "module 'a.b'" or "the root module", for diagnostics.
std::string describeModule(Operation *op) {
  StringRef path = getModulePath(op);
  return path.empty() ? std::string("the root module")
                      : "module '" + path.str() + "'";
}

/// An op of the runtime's unary or binary kernel: the kernel, and the
/// kind's enumerator (UnaryKind::Exp).
struct ElementwiseKind {
  StringRef kernel;
  StringRef kind;
};

/// The kernel and kind that compute `op`, or none for other ops. Fused loops
/// apply the same kinds' scalar math (ElementMath.h) to each element.
std::optional<ElementwiseKind> getElementwiseKind(Operation *op) {
  auto unary = [](StringRef kind) { return ElementwiseKind{"Unary", kind}; };
  auto binary = [](StringRef kind) { return ElementwiseKind{"Binary", kind}; };
  using Kind = std::optional<ElementwiseKind>;
  return llvm::TypeSwitch<Operation *, Kind>(op)
      .Case([&](NegOp) { return unary("Neg"); })
      .Case([&](AbsOp) { return unary("Abs"); })
      .Case([&](ExpOp) { return unary("Exp"); })
      .Case([&](LogOp) { return unary("Log"); })
      .Case([&](SqrtOp) { return unary("Sqrt"); })
      .Case([&](RsqrtOp) { return unary("Rsqrt"); })
      .Case([&](TanhOp) { return unary("Tanh"); })
      .Case([&](SigmoidOp) { return unary("Sigmoid"); })
      .Case([&](ReluOp) { return unary("Relu"); })
      .Case([&](SiluOp) { return unary("Silu"); })
      .Case([&](SinOp) { return unary("Sin"); })
      .Case([&](CosOp) { return unary("Cos"); })
      .Case([&](GeluOp gelu) {
        return unary(gelu.getApproximation() == GeluApproximation::tanh
                         ? "GeluTanh"
                         : "GeluErf");
      })
      .Case([&](GeluGradOp grad) {
        return binary(grad.getApproximation() == GeluApproximation::tanh
                          ? "GeluTanhGrad"
                          : "GeluErfGrad");
      })
      .Case([&](AddOp) { return binary("Add"); })
      .Case([&](SubOp) { return binary("Sub"); })
      .Case([&](MulOp) { return binary("Mul"); })
      .Case([&](DivOp) { return binary("Div"); })
      .Case([&](PowOp) { return binary("Pow"); })
      .Case([&](MaximumOp) { return binary("Maximum"); })
      .Case([&](MinimumOp) { return binary("Minimum"); })
      .Default([](Operation *) -> Kind { return std::nullopt; });
}

/// The C++ element type of a fused loop's values: f64, or f32 for f32 and
/// bf16 elements, which compute in f32 as the kernels do.
StringRef getScalarType(Type type) {
  return type.cast<RankedTensorType>().getElementType().isF64() ? "double"
                                                                : "float";
}

/// How a fused loop reads and writes the elements of one tensor: a bf16
/// element is widened as it is read and rounded as it is written, with the
/// conversions of the target's cast kernel (BFloat16's round-to-nearest-even
/// on the CPU, cuda_bf16.h's on the GPU); f32 and f64 are the values, and
/// so are the bools of a where's condition, which the loop keeps as bools.
/// The CPU reads a bool tensor's bytes as uint8_t: GCC does not vectorize a
/// loop that loads `bool`s (a where's mask made its loop scalar).
struct FusedElementAccess {
  std::string type;
  std::string valueType;
  bool isBF16, isBool;
  bool cuda;

  FusedElementAccess(Type tensor, bool cuda) : cuda(cuda) {
    Type element = tensor.cast<RankedTensorType>().getElementType();
    isBF16 = element.isBF16();
    isBool = element.isInteger(1);
    valueType = isBool ? "bool" : getScalarType(tensor).str();
    if (isBF16)
      type = cuda ? "__nv_bfloat16" : "BFloat16";
    else
      type = isBool && !cuda ? "uint8_t" : valueType;
  }

  std::string widen(StringRef stored) const {
    if (isBool && !cuda)
      return "(" + stored.str() + " != 0)";
    if (!isBF16)
      return stored.str();
    return cuda ? "__bfloat162float(" + stored.str() + ")"
                : stored.str() + ".toFloat()";
  }
  std::string narrow(StringRef value) const {
    if (!isBF16)
      return value.str();
    return cuda ? "__float2bfloat16_rn(" + value.str() + ")"
                : "BFloat16::fromFloat(" + value.str() + ")";
  }
};

/// The dropouts of a fusion group: the statements that read each one's key
/// and first counter, after the operands' and results' addresses, and the
/// host's numbers that they are: its mask keeps element i iff
/// keepsElement(key, first + i, ...) (Random.h), as the dropout kernel draws
/// it for a tensor of this rank that is not split over tp ranks.
struct FusedDraws {
  std::string declarations;
  SmallVector<std::string> arguments;
  DenseMap<Operation *, size_t> index;
};

/// The communicator of a process group in the generated code.
StringRef groupOf(ProcessGroup group) {
  switch (group) {
  case ProcessGroup::dp:
    return "mesh.getDataParallel()";
  case ProcessGroup::tp:
    return "mesh.getTensorParallel()";
  case ProcessGroup::pp:
    return "mesh.getPipeline()";
  case ProcessGroup::tied:
    return "mesh.getTied()";
  }
  llvm_unreachable("unknown process group");
}

/// The opening of a phase function (Program.h's PhaseFn), which runs the
/// kernels of its backend's Context.
std::string phaseSignature(StringRef name) {
  return llvm::formatv("void {0}(Device &device, ProcessMesh &mesh, uint8_t "
                       "*arena, int64_t step) {{\n"
                       "  Context &ctx = static_cast<Context &>(device);\n",
                       name)
      .str();
}

enum class Phase { Forward, Backward, Optimizer };

Phase getPhase(Operation *op) {
  auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
  if (!phase)
    return Phase::Forward;
  return phase.getValue() == "backward" ? Phase::Backward : Phase::Optimizer;
}

/// The phase function that runs `op`: an interleaved forward and backward
/// (interleavesForwardAndBackward: the step's loss is complete only after
/// the last backward) run together in `forward`, which is all --forward-only
/// runs (it then computes the gradients too, as it must to reach the loss).
Phase getEmittedPhase(Operation *op, bool interleaved) {
  Phase phase = getPhase(op);
  return interleaved && phase == Phase::Backward ? Phase::Forward : phase;
}

/// Ops that are views of other tensors' bytes, or data written once, need no
/// call in a phase.
bool needsCall(Operation *op) {
  return !isa<GetParamOp, ConstantOp, ParamGradOp, func::ReturnOp>(op) &&
         !getSameBytesSource(op);
}

/// The module path a call is commented with. An update is about its
/// parameter, whose name holds its module path.
std::string getCallPath(Operation *op) {
  if (auto param = op->getAttrOfType<FlatSymbolRefAttr>("param"))
    return param.getValue().str();
  return getModulePath(op).str();
}

/// The calls of a phase that come from one block of a module list, in a row
/// (blockPath set), or from elsewhere.
struct Segment {
  std::string blockPath;
  SmallVector<Operation *> ops;
};

/// Fewer calls than this read better inline, where they name their own
/// tensors, than as a function and a table of offsets.
constexpr size_t kMinSharedCalls = 4;

/// The function being written and the views it has declared, by value or
/// symbol. A body shared by several blocks reads the offsets of its views,
/// and the numbers that differ between blocks, from the caller's row of its
/// table: `at[slot]`.
struct FunctionScope {
  bool shared = false;
  /// The block path the calls' comments are relative to.
  std::string blockPath;
  DenseMap<const void *, std::string> declared;
  SmallVector<int64_t> slotValues;
};

class Emitter {
public:
  Emitter(ModuleOp module, func::FuncOp step, const RankProgramInfo &info)
      : module(module), step(step), info(info),
        interleaved(interleavesForwardAndBackward(step)),
        extension(info.target == "cuda" ? ".cu" : ".cpp"), os(programText) {}
  FailureOr<std::vector<SourceFile>> emit();

private:
  LogicalResult nameValues();
  LogicalResult emitConstants();
  LogicalResult emitPhase(StringRef name, Phase phase);
  /// The phase's calls, cut where the block they come from changes.
  SmallVector<Segment> getSegments(Phase phase);
  /// Appends the declarations and the call of `op` to `body`.
  LogicalResult emitOp(Operation *op, std::string &body);
  /// The calls of `segment` as a body shared by every block that computes
  /// the same: the same kernels on tensors of the same types, at the offsets
  /// (and with the dropout streams) it returns in `slotValues`.
  FailureOr<std::string> getSharedBody(const Segment &segment,
                                       SmallVector<int64_t> &slotValues);
  /// The call of `op`'s kernel, without the trailing ";".
  FailureOr<std::string> getKernelCall(Operation *op);
  /// The call of the loop that computes `fused`, written first if no group
  /// before it computes the same.
  FailureOr<std::string> getFusedLoopCall(FusedOp fused);
  /// getFusedLoopCall of a group with row ops (a loop over its rows) or
  /// column sums (over blocks of its columns, each over the rows).
  FailureOr<std::string> getFusedRowsCall(FusedOp fused);
  /// The dropouts of `fused`, a loop over `numElements` elements.
  FailureOr<FusedDraws> getFusedDraws(FusedOp fused, int64_t numElements);
  /// The statement of a fused loop that computes `op`'s element (an
  /// elementwise op's) into `name`: `elements` names its operands' values,
  /// `index` is the element's index in the group's loop (a dropout draws its
  /// mask by it).
  std::string getFusedStatement(Operation &op, StringRef name,
                                const DenseMap<Value, std::string> &elements,
                                StringRef scalar, StringRef indent,
                                StringRef index, const FusedDraws &draws);
  /// Names the fused loop `text` (defining it with `comment` where no group
  /// before wrote the same) and returns the call of `runner` with the
  /// group's addresses and then `sizes`. A CUDA group with column sums also
  /// has `finishText`, the kernel that adds its splits' partial sums
  /// (`partialBytes` per split).
  std::string getFusedCall(FusedOp fused, StringRef text, StringRef comment,
                           const FusedDraws &draws, StringRef runner,
                           StringRef sizes, StringRef finishText = "",
                           int64_t partialBytes = 0);
  /// The phase function's `step` argument, which `value` (an operand of `op`
  /// that kernels take as a number on the host) must be: the step number
  /// lives in the arena too, but in the device's memory.
  FailureOr<std::string> getStepNumber(Operation *op, Value value);
  /// The numbers that key the mask of `op` (slapo.dropout, a flash
  /// attention's dropout, or a fusion group's, whose `step` is the group's
  /// operand): "kSeed, step, stream, rankStream", as DropoutKey and
  /// dropoutKey() (Random.h) take them.
  FailureOr<std::string> getDropoutKeyArguments(Operation *op, Value step,
                                                int64_t stream, bool forkRng);
  /// The DropoutKey and DropoutPlacement of the mask of `op` (slapo.dropout,
  /// or a flash attention's dropout): "{seed, step, stream, rankStream},
  /// {placement}".
  FailureOr<std::string> getDropoutDraw(Operation *op, Value step,
                                        int64_t stream, bool forkRng,
                                        std::optional<uint64_t> shardAxis,
                                        std::optional<uint64_t> shardChunks);
  /// The view of `value`, declared in the current function first if needed.
  std::string use(Value value);
  /// The view of a parameter or optimizer state.
  std::string useSymbol(FlatSymbolRefAttr symbol, Type type);
  /// The view of `op`'s workspace (WorkspaceOpInterface), its planned bytes
  /// as I8, or "Tensor()" for an op that needs none.
  std::string useWorkspace(Operation *op);
  /// `value`, a number each block has its own of (a dropout's stream): a
  /// literal, or in a shared body a slot of the caller's row.
  std::string useBlockNumber(int64_t value);
  /// A new slot of the shared body's row, holding `value`, as the body
  /// reads it.
  std::string addSlot(int64_t value);
  /// The view `key` stands for in the current function, declared first if
  /// needed: named `name` at `offset`, or in a shared body after its slot,
  /// `sharedPrefix` + slot + `sharedSuffix`.
  std::string declare(const void *key, StringRef name, StringRef sharedPrefix,
                      StringRef sharedSuffix, Type type, int64_t offset);
  std::string declareView(StringRef name, Type type, StringRef offset);
  void emitTables();

  ModuleOp module;
  func::FuncOp step;
  const RankProgramInfo &info;
  /// Whether the step's forward and backward interleave (microbatches).
  bool interleaved;
  /// Of the source files: ".cpp", or ".cu" for CUDA.
  std::string extension;
  /// step.cpp after its preamble.
  std::string programText;
  llvm::raw_string_ostream os;
  /// The functions blocks share, for blocks.cpp, and their declarations.
  std::string blockFunctions, blockDeclarations;
  DenseMap<Value, std::string> names;
  /// "_linear" for the result of a linear: a value's name in a shared body
  /// is its slot and this.
  DenseMap<Value, std::string> sharedSuffixes;
  DenseMap<Value, int64_t> offsets;
  FunctionScope *scope = nullptr;
  /// Declarations the current op needs, written before its call.
  std::string pendingViews;
  /// Non-splat constant data, written before the functions.
  std::string constantData;
  /// The fused loops' definitions, and their names by the text of their
  /// body: groups that compute the same (those of each block) share one.
  std::string fusedLoops;
  llvm::StringMap<std::string> fusedLoopNames;
  /// Symbols' offsets and the step's persistent slots.
  DenseMap<StringAttr, int64_t> symbolOffsets;
};

std::string Emitter::declareView(StringRef name, Type type, StringRef offset) {
  auto tensor = type.cast<RankedTensorType>();
  return llvm::formatv("  const Tensor {0} = view(arena, {1}, {2}, {3});\n",
                       name, offset, *getDType(tensor.getElementType()),
                       shapeInitializer(tensor.getShape()))
      .str();
}

std::string Emitter::declare(const void *key, StringRef name,
                             StringRef sharedPrefix, StringRef sharedSuffix,
                             Type type, int64_t offset) {
  auto [it, inserted] = scope->declared.try_emplace(key);
  if (!inserted)
    return it->second;
  std::string offsetText = std::to_string(offset);
  it->second = name.str();
  if (scope->shared) {
    it->second =
        (sharedPrefix + Twine(scope->slotValues.size()) + sharedSuffix).str();
    offsetText = addSlot(offset);
  }
  pendingViews += declareView(it->second, type, offsetText);
  return it->second;
}

std::string Emitter::use(Value value) {
  // In a shared body, tensors of the block itself (of any phase) keep their
  // op's name; others come from elsewhere, where each block's differ: the
  // block's inputs. Constants are data, whichever block (CSE) defines them.
  bool ofBlock = false;
  if (Operation *producer = value.getDefiningOp())
    ofBlock = isa<ConstantOp>(producer) ||
              getBlockPath(getCallPath(producer)) == scope->blockPath;
  return declare(value.getAsOpaquePointer(), names[value], ofBlock ? "t" : "in",
                 ofBlock ? StringRef(sharedSuffixes[value]) : StringRef(),
                 value.getType(), offsets[value]);
}

std::string Emitter::addSlot(int64_t value) {
  scope->slotValues.push_back(value);
  return "at[" + std::to_string(scope->slotValues.size() - 1) + "]";
}

std::string Emitter::useBlockNumber(int64_t value) {
  return scope->shared ? addSlot(value) : std::to_string(value);
}

// Parameters and optimizer state are named after their offset, the one
// identifier of a symbol that no model name can influence.
std::string Emitter::useSymbol(FlatSymbolRefAttr symbol, Type type) {
  int64_t offset = symbolOffsets.lookup(symbol.getAttr());
  return declare(symbol.getAttr().getAsOpaquePointer(),
                 "s" + std::to_string(offset), "s", "", type, offset);
}

std::string Emitter::useWorkspace(Operation *op) {
  auto planned = op->getAttrOfType<DenseI64ArrayAttr>(kWorkspaceAttrName);
  if (!planned)
    return "Tensor()";
  auto type = RankedTensorType::get({planned[1]},
                                    IntegerType::get(op->getContext(), 8));
  return declare(op, names[op->getResult(0)] + "_workspace", "w", "_workspace",
                 type, planned[0]);
}

FailureOr<std::string> Emitter::getStepNumber(Operation *op, Value value) {
  Block &block = step.getBody().front();
  // The step's arguments: the inputs, then the step number and the total.
  Value stepNumber = block.getArgument(block.getNumArguments() - 2);
  if (value != stepNumber)
    return op->emitError("code generation: the step operand must be "
                         "@train_step's step number argument");
  return std::string("step");
}

FailureOr<std::string> Emitter::getDropoutKeyArguments(Operation *op,
                                                       Value step,
                                                       int64_t stream,
                                                       bool forkRng) {
  if (!step)
    return op->emitError(
        "code generation: the dropout has no step number (slapo-"
        "optimizer gives every dropout of @train_step its %step)");
  FailureOr<std::string> number = getStepNumber(op, step);
  if (failed(number))
    return failure();
  return llvm::formatv("kSeed, {0}, /*stream=*/{1}, /*rankStream=*/{2}",
                       *number, useBlockNumber(stream),
                       forkRng ? "mesh.getTpRank()" : "0")
      .str();
}

FailureOr<std::string>
Emitter::getDropoutDraw(Operation *op, Value step, int64_t stream, bool forkRng,
                        std::optional<uint64_t> shardAxis,
                        std::optional<uint64_t> shardChunks) {
  FailureOr<std::string> key =
      getDropoutKeyArguments(op, step, stream, forkRng);
  if (failed(key))
    return failure();
  // The rank's place in the whole tensor the mask is drawn for: its
  // rows of the batch, and its part of a tensor-parallel split.
  std::string placement = "{mesh.getDpRank()}";
  if (shardAxis)
    placement = llvm::formatv("{{mesh.getDpRank(), {{/*axis=*/{0}, "
                              "/*chunks=*/{1}, mesh.getTp()}, "
                              "mesh.getTpRank()}",
                              *shardAxis, shardChunks.value_or(1))
                    .str();
  return "{" + *key + "}, " + placement;
}

LogicalResult Emitter::nameValues() {
  Block &block = step.getBody().front();
  for (BlockArgument arg : block.getArguments()) {
    if (failed(
            getDType(arg.getType().cast<RankedTensorType>().getElementType())))
      return step.emitError("code generation: argument #")
             << arg.getArgNumber() << " has an unsupported element type";
    names[arg] = "arg" + std::to_string(arg.getArgNumber());
    offsets[arg] =
        step.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kOffsetAttrName)
            .getInt();
  }
  int64_t counter = 0;
  for (Operation &op : block) {
    auto planned = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttrName);
    if (op.getNumResults() && !planned)
      return op.emitError("code generation: the op has no memory plan (run "
                          "slapo-plan-memory)");
    auto withWorkspace = dyn_cast<WorkspaceOpInterface>(op);
    if (withWorkspace && withWorkspace.getWorkspaceBytes() &&
        !op.hasAttr(kWorkspaceAttrName))
      return op.emitError("code generation: the op's workspace has no memory "
                          "plan (run slapo-plan-memory)");
    for (auto [i, result] : llvm::enumerate(op.getResults())) {
      if (failed(getDType(
              result.getType().cast<RankedTensorType>().getElementType())))
        return op.emitError("code generation: unsupported element type ")
               << result.getType();
      std::string stem = op.getName().stripDialect().str();
      names[result] = llvm::formatv("t{0}_{1}", counter++, stem).str();
      sharedSuffixes[result] = "_" + stem;
      offsets[result] = planned[i];
    }
  }
  for (Operation &op : module.getBody()->getOperations())
    if (auto offset = op.getAttrOfType<IntegerAttr>(kOffsetAttrName))
      symbolOffsets[SymbolTable::getSymbolName(&op)] = offset.getInt();
  return success();
}

LogicalResult Emitter::emitConstants() {
  std::string body;
  int64_t index = 0;
  for (auto constant : step.getBody().front().getOps<ConstantOp>()) {
    auto dense = constant.getValue().dyn_cast<DenseElementsAttr>();
    if (!dense)
      return constant.emitError("code generation: only dense constants are "
                                "supported");
    Value result = constant.getResult();
    body += declareView(names[result], result.getType(),
                        std::to_string(offsets[result]));
    Type elementType = dense.getElementType();
    if (dense.isSplat()) {
      double value;
      if (auto floatType = elementType.dyn_cast<FloatType>())
        value = dense.getSplatValue<APFloat>().convertToDouble();
      else
        value = double(dense.getSplatValue<APInt>().getSExtValue());
      bool exact =
          elementType.isa<FloatType>() ||
          int64_t(value) == dense.getSplatValue<APInt>().getSExtValue();
      if (exact) {
        body += llvm::formatv("  fill(ctx, {0}, {1});\n", names[result],
                              doubleLiteral(value));
        continue;
      }
    }
    // The bytes as the runtime lays them out: little-endian elements, bools
    // as one byte each.
    std::vector<uint8_t> bytes;
    if (elementType.isInteger(1)) {
      for (bool value : dense.getValues<bool>())
        bytes.push_back(value);
    } else {
      int64_t width = elementType.getIntOrFloatBitWidth() / 8;
      auto append = [&](const APInt &value) {
        for (int64_t b = 0; b < width; ++b)
          bytes.push_back(value.extractBitsAsZExtValue(8, 8 * b));
      };
      if (elementType.isa<FloatType>())
        for (APFloat value : dense.getValues<APFloat>())
          append(value.bitcastToAPInt());
      else
        for (APInt value : dense.getValues<APInt>())
          append(value);
    }
    std::string name = "kConstant" + std::to_string(index++);
    constantData += "alignas(64) const uint8_t " + name + "[] = {";
    for (auto [i, byte] : llvm::enumerate(bytes))
      constantData += (i % 16 ? " " : "\n    ") + std::to_string(byte) + ",";
    constantData += "\n};\n";
    body +=
        llvm::formatv("  copyFrom(ctx, {0}, {1});\n", names[result], name);
  }
  os << constantData << "\n";
  os << "/// The step's constants, written once into their arena slots.\n"
     << phaseSignature("initialize") << body << "}\n\n";
  return success();
}

FailureOr<std::string> Emitter::getKernelCall(Operation *op) {
  auto out = [&]() { return use(op->getResult(0)); };
  auto optional = [&](Value value) {
    return value ? use(value) : std::string("Tensor()");
  };
  // A result no op reads, which the kernel need not compute.
  auto ifRead = [&](Value result) {
    return result.use_empty() ? std::string("Tensor()") : use(result);
  };
  if (std::optional<ElementwiseKind> kind = getElementwiseKind(op)) {
    std::string operands;
    for (Value operand : op->getOperands())
      operands += use(operand) + ", ";
    return llvm::formatv("{0}(ctx, {1}Kind::{2}, {3}{4})", kind->kernel.lower(),
                         kind->kernel, kind->kind, operands, out())
        .str();
  }
  // A flash attention's dropout as the kernels' last argument (an
  // AttentionDropout), or nothing without one.
  auto attentionDropout = [&](auto attention) -> FailureOr<std::string> {
    std::optional<APFloat> p = attention.getDropoutP();
    if (!p)
      return std::string();
    FailureOr<std::string> draw = getDropoutDraw(
        op, attention.getStep(), attention.getDropoutStream().value_or(0),
        attention.getForkRng(), attention.getShardAxis(),
        attention.getShardChunks());
    if (failed(draw))
      return failure();
    return llvm::formatv(", /*dropout=*/{{{0}, {1}}",
                         doubleLiteral(p->convertToDouble()), *draw)
        .str();
  };
  auto attentionLayout = [](auto attention) {
    return attention.getBshd() ? "AttentionLayout::Bshd"
                               : "AttentionLayout::Bhsd";
  };
  // Query, key and value (or their gradients, given `packed`, the packed
  // tensor or its gradient, for packed_qkv) as the kernels' three
  // arguments: under packed_qkv, the windows of its three thirds of heads.
  auto queryKeyValue = [&](Value query, Value key, Value value, Value packed) {
    if (!packed)
      return llvm::formatv("{0}, {1}, {2}", use(query), use(key), use(value))
          .str();
    int64_t heads = packed.getType().cast<ShapedType>().getShape()[2] / 3;
    return llvm::formatv("headWindow({0}, 0), headWindow({0}, {1}), "
                         "headWindow({0}, {2})",
                         use(packed), heads, 2 * heads)
        .str();
  };
  auto reduce = [&](StringRef kind, ArrayRef<int64_t> dims) -> std::string {
    return llvm::formatv("reduce(ctx, ReduceKind::{0}, {1}, {2}, "
                         "{3}u)",
                         kind, use(op->getOperand(0)), out(), dimMask(dims));
  };
  using Call = FailureOr<std::string>;
  return llvm::TypeSwitch<Operation *, Call>(op)
      .Case([&](FusedOp fused) { return getFusedLoopCall(fused); })
      .Case([&](CastOp) -> Call {
        return llvm::formatv("cast(ctx, {0}, {1})", use(op->getOperand(0)),
                             out())
            .str();
      })
      .Case([&](CompareOp compare) -> Call {
        return llvm::formatv(
                   "compare(ctx, CompareKind::{0}, {1}, {2}, {3})",
                   capitalize(
                       stringifyComparePredicate(compare.getPredicate())),
                   use(compare.getLhs()), use(compare.getRhs()), out())
            .str();
      })
      .Case([&](WhereOp where) -> Call {
        return llvm::formatv("where(ctx, {0}, {1}, {2}, {3})",
                             use(where.getCondition()), use(where.getOnTrue()),
                             use(where.getOnFalse()), out())
            .str();
      })
      .Case([&](TriangularOp tri) -> Call {
        return llvm::formatv("triangular(ctx, {0}, {1}, {2}, {3})",
                             use(tri.getInput()), out(),
                             tri.getLower() ? "true" : "false",
                             int64_t(tri.getDiagonal()))
            .str();
      })
      .Case([&](DropoutOp dropout) -> Call {
        FailureOr<std::string> draw = getDropoutDraw(
            op, dropout.getStep(), dropout.getStream(), dropout.getForkRng(),
            dropout.getShardAxis(), dropout.getShardChunks());
        if (failed(draw))
          return failure();
        return llvm::formatv("dropout(ctx, {0}, {1}, {2}, {3})",
                             use(dropout.getInput()), out(),
                             doubleLiteral(dropout.getP().convertToDouble()),
                             *draw)
            .str();
      })
      .Case([&](ArangeOp arange) -> Call {
        return llvm::formatv("arange(ctx, {0}, {1}, {2})", out(),
                             doubleLiteral(arange.getStart().convertToDouble()),
                             doubleLiteral(arange.getStep().convertToDouble()))
            .str();
      })
      .Case([&](LinearOp linear) -> Call {
        return llvm::formatv("linear(ctx, {0}, {1}, {2}, {3})",
                             use(linear.getInput()), use(linear.getWeight()),
                             optional(linear.getBias()), out())
            .str();
      })
      .Case([&](MatmulOp matmul) -> Call {
        std::optional<ArrayRef<int64_t>> orders[] = {
            matmul.getLhsPermutation(), matmul.getRhsPermutation(),
            matmul.getResultPermutation()};
        std::string call =
            llvm::formatv("matmul(ctx, {0}, {1}, {2}",
                          use(matmul.getLhs()), use(matmul.getRhs()), out());
        if (llvm::none_of(orders, [](auto order) { return order; }))
          return call + ")";
        call += ", {";
        for (auto [i, order] : llvm::enumerate(orders))
          call += (i ? ", " : "") + (order ? int64Array(*order) : "nullptr");
        return call + "})";
      })
      .Case([&](EmbeddingOp embedding) -> Call {
        return llvm::formatv("embedding(ctx, {0}, {1}, {2})",
                             use(embedding.getWeight()),
                             use(embedding.getIndices()), out())
            .str();
      })
      .Case([&](EmbeddingGradOp grad) -> Call {
        std::optional<uint64_t> padding = grad.getPaddingIdx();
        return llvm::formatv("embeddingGrad(ctx, {0}, {1}, {2}, {3})",
                             use(grad.getGrad()), use(grad.getIndices()), out(),
                             padding ? int64_t(*padding) : -1)
            .str();
      })
      .Case([&](LayerNormOp norm) -> Call {
        return llvm::formatv(
                   "layerNorm(ctx, {0}, {1}, {2}, {3}, {4}, {5})",
                   use(norm.getInput()), optional(norm.getWeight()),
                   optional(norm.getBias()), out(),
                   int64_t(norm.getNormalizedRank()),
                   doubleLiteral(norm.getEps().convertToDouble()))
            .str();
      })
      .Case([&](LayerNormGradOp grad) -> Call {
        return llvm::formatv(
                   "layerNormGrad(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                   "{8})",
                   use(grad.getGrad()), use(grad.getInput()),
                   optional(grad.getWeight()), optional(grad.getAddend()),
                   use(grad.getGradInput()), ifRead(grad.getGradWeight()),
                   ifRead(grad.getGradBias()),
                   int64_t(grad.getNormalizedRank()),
                   doubleLiteral(grad.getEps().convertToDouble()))
            .str();
      })
      .Case([&](RotaryEmbeddingOp rotary) -> Call {
        return llvm::formatv("rotaryEmbedding(ctx, {0}, {1}, {2}, {3}, {4})",
                             use(rotary.getInput()), use(rotary.getCos()),
                             use(rotary.getSin()), out(),
                             rotary.getTransposed() ? "true" : "false")
            .str();
      })
      .Case([&](RmsNormOp norm) -> Call {
        return llvm::formatv("rmsNorm(ctx, {0}, {1}, {2}, {3})",
                             use(norm.getInput()), optional(norm.getWeight()),
                             out(),
                             doubleLiteral(norm.getEps().convertToDouble()))
            .str();
      })
      .Case([&](RmsNormGradOp grad) -> Call {
        return llvm::formatv(
                   "rmsNormGrad(ctx, {0}, {1}, {2}, {3}, {4}, {5}, "
                   "{6})",
                   use(grad.getGrad()), use(grad.getInput()),
                   optional(grad.getWeight()), optional(grad.getAddend()),
                   use(grad.getGradInput()), ifRead(grad.getGradWeight()),
                   doubleLiteral(grad.getEps().convertToDouble()))
            .str();
      })
      .Case([&](Conv2dOp conv) -> Call {
        return llvm::formatv("conv2d(ctx, {0}, {1}, {2}, {3}, {4}, {5})",
                             use(conv.getInput()), use(conv.getWeight()),
                             optional(conv.getBias()), out(),
                             window2d(kernelOf(conv.getWeight()),
                                      conv.getStride(), conv.getPadding(),
                                      conv.getDilation()),
                             int64_t(conv.getGroups()))
            .str();
      })
      .Case<Conv2dGradInputOp, Conv2dGradWeightOp>([&](auto grad) -> Call {
        // (grad, weight) -> input, or (grad, input) -> weight.
        bool ofInput = isa<Conv2dGradInputOp>(grad.getOperation());
        Value weight = ofInput ? grad->getOperand(1) : grad->getResult(0);
        return llvm::formatv("{0}(ctx, {1}, {2}, {3}, {4}, {5})",
                             ofInput ? "conv2dGradInput" : "conv2dGradWeight",
                             use(grad->getOperand(0)), use(grad->getOperand(1)),
                             out(),
                             window2d(kernelOf(weight), grad.getStride(),
                                      grad.getPadding(), grad.getDilation()),
                             int64_t(grad.getGroups()))
            .str();
      })
      .Case([&](MaxPool2dOp pool) -> Call {
        return llvm::formatv("maxPool2d(ctx, {0}, {1}, {2})",
                             use(pool.getInput()), out(),
                             window2d(pool.getKernelSize(), pool.getStride(),
                                      pool.getPadding(), pool.getDilation()))
            .str();
      })
      .Case([&](MaxPool2dGradOp grad) -> Call {
        return llvm::formatv("maxPool2dGrad(ctx, {0}, {1}, {2}, {3})",
                             use(grad.getGrad()), use(grad.getInput()), out(),
                             window2d(grad.getKernelSize(), grad.getStride(),
                                      grad.getPadding(), grad.getDilation()))
            .str();
      })
      .Case([&](SoftmaxOp softmax) -> Call {
        return llvm::formatv("softmax(ctx, {0}, {1}, {2})",
                             use(softmax.getInput()), out(),
                             int64_t(softmax.getDim()))
            .str();
      })
      .Case([&](LogSoftmaxOp softmax) -> Call {
        return llvm::formatv("logSoftmax(ctx, {0}, {1}, {2})",
                             use(softmax.getInput()), out(),
                             int64_t(softmax.getDim()))
            .str();
      })
      .Case([&](CrossEntropyOp loss) -> Call {
        return llvm::formatv(
                   "crossEntropy(ctx, {0}, {1}, {2}, {3}, "
                   "Reduction::{4})",
                   use(loss.getLogits()), use(loss.getTarget()), out(),
                   int64_t(loss.getIgnoreIndex()),
                   capitalize(stringifyReduction(loss.getReduction())))
            .str();
      })
      .Case([&](CrossEntropyGradOp grad) -> Call {
        return llvm::formatv("crossEntropyGrad(ctx, {0}, {1}, {2}, {3})",
                             use(grad.getLogits()), use(grad.getTarget()),
                             use(grad.getRowWeight()), out())
            .str();
      })
      .Case([&](LinearCrossEntropyOp loss) -> Call {
        return llvm::formatv(
                   "linearCrossEntropy(ctx, {0}, {1}, {2}, {3}, {4}, {5}, "
                   "{6}, {7}, {8}, {9}, Reduction::{10})",
                   use(loss.getHidden()), use(loss.getWeight()),
                   use(loss.getTarget()), optional(loss.getBias()),
                   use(loss.getLoss()), use(loss.getGradHidden()),
                   use(loss.getGradWeight()), optional(loss.getGradBias()),
                   useWorkspace(op), int64_t(loss.getIgnoreIndex()),
                   capitalize(stringifyReduction(loss.getReduction())))
            .str();
      })
      .Case([&](LinearLogSumExpOp logSumExp) -> Call {
        return llvm::formatv(
                   "linearLogSumExp(ctx, {0}, {1}, {2}, {3}, {4})",
                   use(logSumExp.getHidden()), use(logSumExp.getWeight()),
                   optional(logSumExp.getBias()), out(), useWorkspace(op))
            .str();
      })
      .Case([&](LinearLogSumExpGradOp grad) -> Call {
        return llvm::formatv(
                   "linearLogSumExpGrad(ctx, {0}, {1}, {2}, {3}, {4}, {5}, "
                   "{6}, {7}, {8})",
                   use(grad.getHidden()), use(grad.getWeight()),
                   optional(grad.getBias()), use(grad.getLogsumexp()),
                   use(grad.getGrad()), use(grad.getGradHidden()),
                   use(grad.getGradWeight()), optional(grad.getGradBias()),
                   useWorkspace(op))
            .str();
      })
      .Case([&](FlashAttentionOp attention) -> Call {
        FailureOr<std::string> dropout = attentionDropout(attention);
        if (failed(dropout))
          return failure();
        Value packed =
            attention.getPackedQkv() ? attention.getQuery() : Value();
        return llvm::formatv(
                   "flashAttention(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                   "{7}{8})",
                   queryKeyValue(attention.getQuery(), attention.getKey(),
                                 attention.getValue(), packed),
                   optional(attention.getKeep()), optional(attention.getBias()),
                   use(attention.getResult()), use(attention.getLogsumexp()),
                   doubleLiteral(attention.getScale().convertToDouble()),
                   doubleLiteral(attention.getMaskedScore().convertToDouble()),
                   attentionLayout(attention), *dropout)
            .str();
      })
      .Case([&](FlashAttentionGradOp grad) -> Call {
        FailureOr<std::string> dropout = attentionDropout(grad);
        if (failed(dropout))
          return failure();
        bool packed = grad.getPackedQkv();
        ValueRange grads = grad.getGrads();
        return llvm::formatv(
                   "flashAttentionGrad(ctx, {0}, {1}, {2}, {3}, {4}, {5}, "
                   "{6}, {7}, {8}, {9}{10})",
                   queryKeyValue(grad.getQuery(), grad.getKey(),
                                 grad.getValue(),
                                 packed ? grad.getQuery() : Value()),
                   optional(grad.getKeep()), optional(grad.getBias()),
                   use(grad.getResult()), use(grad.getLogsumexp()),
                   use(grad.getGrad()),
                   packed ? queryKeyValue({}, {}, {}, grads[0])
                          : queryKeyValue(grads[0], grads[1], grads[2], {}),
                   doubleLiteral(grad.getScale().convertToDouble()),
                   doubleLiteral(grad.getMaskedScore().convertToDouble()),
                   attentionLayout(grad), *dropout)
            .str();
      })
      .Case([&](SumOp sum) { return reduce("Sum", sum.getDims()); })
      .Case([&](MeanOp mean) { return reduce("Mean", mean.getDims()); })
      .Case([&](MaxOp max) { return reduce("Max", max.getDims()); })
      .Case([&](CumsumOp cumsum) -> Call {
        return llvm::formatv("cumsum(ctx, {0}, {1}, {2}, {3})",
                             use(cumsum.getInput()), out(),
                             int64_t(cumsum.getDim()),
                             cumsum.getReverse() ? "true" : "false")
            .str();
      })
      .Case([&](PermuteOp permute) -> Call {
        return llvm::formatv("permute(ctx, {0}, {1}, {2})",
                             use(permute.getInput()), out(),
                             int64Array(permute.getPermutation()))
            .str();
      })
      .Case([&](SliceOp slice) -> Call {
        return llvm::formatv("slice(ctx, {0}, {1}, {2}, {3}, {4})",
                             use(slice.getInput()), out(),
                             int64_t(slice.getDim()), int64_t(slice.getStart()),
                             int64_t(slice.getStep()))
            .str();
      })
      .Case([&](ConcatOp concat) -> Call {
        std::string list;
        for (auto [i, input] : llvm::enumerate(concat.getInputs()))
          list += (i ? ", " : "") + use(input);
        return llvm::formatv("concat(ctx, std::array<Tensor, {0}>{{{1}}"
                             ".data(), {0}, {2}, {3})",
                             concat.getInputs().size(), list, out(),
                             int64_t(concat.getDim()))
            .str();
      })
      .Case([&](BroadcastOp broadcast) -> Call {
        return llvm::formatv("broadcast(ctx, {0}, {1})",
                             use(broadcast.getInput()), out())
            .str();
      })
      .Case([&](AllReduceOp allReduce) -> Call {
        std::string inputs, outputs;
        for (auto [input, result] :
             llvm::zip(allReduce.getInputs(), allReduce.getResults())) {
          StringRef separator = inputs.empty() ? "" : ", ";
          inputs += separator.str() + use(input);
          outputs += separator.str() + use(result);
        }
        return llvm::formatv(
                   "allReduce(ctx, {0}, std::array<Tensor, {1}>{{{2}}.data(), "
                   "std::array<Tensor, {1}>{{{3}}.data(), {1}, /*mean=*/{4})",
                   groupOf(allReduce.getGroup()), allReduce.getNumOperands(),
                   inputs, outputs, allReduce.getMean() ? "true" : "false")
            .str();
      })
      .Case<AllGatherOp, ScatterOp, ReduceScatterOp>(
          [&](Operation *op) -> Call {
            StringRef function =
                llvm::TypeSwitch<Operation *, StringRef>(op)
                    .Case<AllGatherOp>([](auto) { return "allGather"; })
                    .Case<ScatterOp>([](auto) { return "scatter"; })
                    .Default([](auto) { return "reduceScatter"; });
            auto group =
                op->getAttrOfType<ProcessGroupAttr>("group").getValue();
            auto dim = op->getAttrOfType<IntegerAttr>("dim").getInt();
            return llvm::formatv("{0}(ctx, {1}, {2}, {3}, {4})", function,
                                 groupOf(group), use(op->getOperand(0)), out(),
                                 dim)
                .str();
          })
      .Case([&](StageSendOp send) -> Call {
        return llvm::formatv("sendTensor(ctx, mesh.getPipeline(), {0}, {1})",
                             use(send.getInput()), int64_t(send.getTo()))
            .str();
      })
      .Case([&](StageRecvOp recv) -> Call {
        return llvm::formatv("recvTensor(ctx, mesh.getPipeline(), {0}, {1})",
                             out(), int64_t(recv.getFrom()))
            .str();
      })
      .Case([&](GroupRankOp rank) -> Call {
        return llvm::formatv("fill(ctx, {0}, {1}.getRank())", out(),
                             groupOf(rank.getGroup()))
            .str();
      })
      .Case([&](UpdateBufferOp update) -> Call {
        Value value = update.getValue();
        return llvm::formatv("copy(ctx, {0}, {1})", use(value),
                             useSymbol(update.getBufferAttr(), value.getType()))
            .str();
      })
      .Case([&](SgdUpdateOp update) -> Call {
        Type type = getParamType(update, update.getParamAttr());
        std::string param = useSymbol(update.getParamAttr(), type);
        std::string buffer =
            update.getMomentumBufferAttr()
                ? useSymbol(update.getMomentumBufferAttr(), type)
                : std::string("Tensor()");
        return llvm::formatv(
                   "sgdUpdate(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6})", param,
                   use(update.getGrad()), optional(update.getGradScale()),
                   buffer, use(update.getLr()),
                   doubleLiteral(update.getMomentum().convertToDouble()),
                   doubleLiteral(update.getWeightDecay().convertToDouble()))
            .str();
      })
      .Case([&](AdamwUpdateOp update) -> Call {
        Type type = getParamType(update, update.getParamAttr());
        FailureOr<std::string> step = getStepNumber(op, update.getStep());
        if (failed(step))
          return failure();
        return llvm::formatv(
                   "adamwUpdate(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                   "{8}, {9}, {10})",
                   useSymbol(update.getParamAttr(), type),
                   use(update.getGrad()), optional(update.getGradScale()),
                   useSymbol(update.getExpAvgAttr(), type),
                   useSymbol(update.getExpAvgSqAttr(), type),
                   use(update.getLr()), *step,
                   doubleLiteral(update.getBeta1().convertToDouble()),
                   doubleLiteral(update.getBeta2().convertToDouble()),
                   doubleLiteral(update.getEps().convertToDouble()),
                   doubleLiteral(update.getWeightDecay().convertToDouble()))
            .str();
      })
      .Default([&](Operation *op) -> Call {
        return op->emitError("code generation does not support '")
               << op->getName() << "' yet (in " << describeModule(op) << ")";
      });
}

/// The index of a broadcast operand's element at loop element `at`: its
/// `count` elements repeat every `inner` loop elements. The division or the
/// remainder that changes nothing is left out, so that the code reads as
/// what it indexes (a row: `at % count`; a column: `at / inner`).
static std::string getBroadcastIndex(StringRef at,
                                     const BroadcastIndexing &indexing,
                                     int64_t numElements) {
  std::string index = at.str();
  if (indexing.inner != 1)
    index += " / " + std::to_string(indexing.inner);
  if (indexing.inner * indexing.count != numElements)
    index += " % " + std::to_string(indexing.count);
  return index;
}

/// The array of a fused loop's addresses: its operands', its results', then
/// its dropouts' numbers.
static StringRef getFusedAddresses(bool cuda) {
  return cuda ? "operands.data" : "data";
}

/// Declares the pointer `in<n>` to a fused loop's operand `arg` in
/// `pointers` and returns how the loop reads its elements; none for an
/// operand the loop does not read (a dropout's step number, which the host
/// reads: its mask's key).
static std::optional<FusedElementAccess>
declareFusedInput(BlockArgument arg, bool cuda, std::string &pointers) {
  Type element = arg.getType().cast<RankedTensorType>().getElementType();
  if (!element.isa<FloatType>() && !element.isInteger(1))
    return std::nullopt;
  FusedElementAccess access(arg.getType(), cuda);
  pointers +=
      llvm::formatv("  const {0} *__restrict in{1} = static_cast<"
                    "const {0} *>({2}[{1}]);\n",
                    access.type, arg.getArgNumber(), getFusedAddresses(cuda));
  return access;
}

/// Declares the pointer `out<n>` to a fused loop's result #n, `value`, in
/// `pointers` (after the loop's `numInputs` operands) and returns how the
/// loop writes its elements.
static FusedElementAccess declareFusedResult(Value value, unsigned n,
                                             unsigned numInputs, bool cuda,
                                             std::string &pointers) {
  FusedElementAccess access(value.getType(), cuda);
  pointers += llvm::formatv(
      "  {0} *__restrict out{1} = static_cast<{0} *>({3}[{2}]);\n", access.type,
      n, numInputs + n, getFusedAddresses(cuda));
  return access;
}

FailureOr<FusedDraws> Emitter::getFusedDraws(FusedOp fused,
                                             int64_t numElements) {
  StringRef data = getFusedAddresses(info.target == "cuda");
  unsigned numAddresses = fused.getNumOperands() + fused.getNumResults();
  FusedDraws draws;
  for (DropoutOp dropout : fused.getBody().front().getOps<DropoutOp>()) {
    size_t draw = draws.index.size();
    draws.index[dropout] = draw;
    draws.declarations += llvm::formatv(
        "  const uint64_t key{0} = reinterpret_cast<uintptr_t>({1}[{2}]);\n"
        "  const uint64_t first{0} = reinterpret_cast<uintptr_t>({1}[{3}]);"
        "\n",
        draw, data, numAddresses + 2 * draw, numAddresses + 2 * draw + 1);
    auto arg = dropout.getStep().cast<BlockArgument>();
    FailureOr<std::string> key =
        getDropoutKeyArguments(fused, fused.getInputs()[arg.getArgNumber()],
                               dropout.getStream(), dropout.getForkRng());
    if (failed(key))
      return failure();
    draws.arguments.push_back("reinterpret_cast<void *>(uintptr_t(dropoutKey(" +
                              *key + ")))");
    // This data-parallel rank's rows follow the lower ranks' in the batch.
    draws.arguments.push_back(
        llvm::formatv("reinterpret_cast<void *>(uintptr_t(mesh.getDpRank() "
                      "* {0}))",
                      numElements)
            .str());
  }
  return draws;
}

std::string
Emitter::getFusedStatement(Operation &op, StringRef name,
                           const DenseMap<Value, std::string> &elements,
                           StringRef scalar, StringRef indent, StringRef index,
                           const FusedDraws &draws) {
  bool cuda = info.target == "cuda";
  if (auto dropout = dyn_cast<DropoutOp>(&op)) {
    std::string p = doubleLiteral(dropout.getP().convertToDouble());
    // Dropped elements are multiplied by 0, as the kernel does: NaN stays.
    return llvm::formatv(
        "{0}const {1} {2} = {3} * (keepsElement(key{4}, first{4} + "
        "uint64_t({6}), dropoutThreshold({5})) ? static_cast<{1}>(1.0 / (1.0 "
        "- {5})) : {1}(0));\n",
        indent, scalar, name, elements.lookup(dropout.getInput()),
        draws.index.lookup(dropout), p, index);
  }
  if (auto where = dyn_cast<WhereOp>(&op))
    return llvm::formatv("{0}const {1} {2} = {3} ? {4} : {5};\n", indent,
                         scalar, name, elements.lookup(where.getCondition()),
                         elements.lookup(where.getOnTrue()),
                         elements.lookup(where.getOnFalse()));
  if (auto cast = dyn_cast<CastOp>(&op)) {
    // To bf16: the value the cast kernel stores, in the loop's type; from
    // bf16: the widened value itself.
    FusedElementAccess result(cast.getType(), cuda);
    return llvm::formatv(
        "{0}const {1} {2} = {3};\n", indent, scalar, name,
        result.widen(result.narrow(elements.lookup(cast.getInput()))));
  }
  ElementwiseKind kind = *getElementwiseKind(&op);
  std::string arguments;
  for (Value operand : op.getOperands())
    arguments += (arguments.empty() ? "" : ", ") + elements.lookup(operand);
  return llvm::formatv("{6}const {0} {1} = {2}::apply{3}<{3}Kind::"
                       "{4}>({5});\n",
                       scalar, name, info.target, kind.kernel, kind.kind,
                       arguments, indent);
}

/// The ops of a fusion group, for the comment of its loop.
static std::string getFusedOpNames(FusedOp fused) {
  std::string names;
  for (Operation &op : fused.getBody().front().without_terminator())
    names += (names.empty() ? "" : ", ") + op.getName().stripDialect().str();
  return names;
}

std::string Emitter::getFusedCall(FusedOp fused, StringRef text,
                                  StringRef comment, const FusedDraws &draws,
                                  StringRef runner, StringRef sizes,
                                  StringRef finishText, int64_t partialBytes) {
  unsigned numOperands =
      fused.getNumOperands() + fused.getNumResults() + draws.arguments.size();
  auto [it, inserted] = fusedLoopNames.try_emplace(
      (text + finishText).str(),
      "FusedLoop" + std::to_string(fusedLoopNames.size()));
  std::string name = it->second;
  if (inserted && !finishText.empty())
    fusedLoops +=
        "/// " + comment.str() + "\n" + "static __global__ void " + name +
        "Kernel" + text.str() + "/// " + name +
        "Kernel's splits' partial sums, added in split order.\n" +
        "static __global__ void " + name + "Finish" + finishText.str() +
        llvm::formatv("SLAPO_CUDA_FUSED_COLUMNS(k{0}, {0}Kernel, {0}Finish, "
                      "{1}, {2})\n\n",
                      name, numOperands, partialBytes)
            .str();
  else if (inserted && info.target == "cuda")
    fusedLoops += "/// " + comment.str() + "\n" + "static __global__ void " +
                  name + "Kernel" + text.str() +
                  llvm::formatv("SLAPO_CUDA_FUSED_LOOP(k{0}, {0}Kernel, {1})"
                                "\n\n",
                                name, numOperands)
                      .str();
  else if (inserted)
    fusedLoops += "/// " + comment.str() + "\n" + "SLAPO_VECTOR_INLINE void " +
                  name + "Body" + text.str() + "SLAPO_CPU_FUSED_LOOP(k" + name +
                  ", " + name + "Body)\n\n";

  std::string pointerList;
  for (Value value : fused.getInputs())
    pointerList += use(value) + ".data, ";
  for (Value value : fused.getResults())
    pointerList += use(value) + ".data, ";
  for (const std::string &argument : draws.arguments)
    pointerList += argument + ", ";
  pointerList.resize(pointerList.size() - 2);
  return llvm::formatv("{0}(ctx, k{1}, std::array<void *, {2}>{{{3}}"
                       ".data(), {4})",
                       runner, name, numOperands, pointerList, sizes)
      .str();
}

FailureOr<std::string> Emitter::getFusedLoopCall(FusedOp fused) {
  if (fused.hasRowOps() || fused.hasColumnSums())
    return getFusedRowsCall(fused);
  Block &body = fused.getBody().front();
  SmallVector<int64_t> loop = fused.getLoopShape();
  int64_t numElements =
      fused.getResult(0).getType().cast<RankedTensorType>().getNumElements();
  StringRef scalar = getScalarType(fused.getResult(0).getType());
  bool cuda = info.target == "cuda";
  // The CPU loop reads each operand's element once, computes every op's in
  // a register and writes the results'. A broadcast operand is read in runs
  // in which its elements are contiguous (a row, inner 1) or one (a column),
  // so that the loop over a run vectorizes: runs of `run` elements, aligned
  // to it, `run` dividing every row's count and every column's inner size.
  // `omp simd` vectorizes it where -O2's cost model would not (a trip count
  // known only at run time); without reductions it changes no element. The
  // CUDA kernel is a grid-stride loop, one element per thread and step, a
  // broadcast operand's element found by index.
  SmallVector<BroadcastIndexing> indexings;
  int64_t run = 0;
  for (BlockArgument arg : body.getArguments()) {
    indexings.push_back(*getBroadcastIndexing(
        arg.getType().cast<RankedTensorType>().getShape(), loop));
    const BroadcastIndexing &indexing = indexings.back();
    if (indexing.count != 1 && indexing.count != numElements)
      run =
          std::gcd(run, indexing.inner == 1 ? indexing.count : indexing.inner);
  }
  // The element's statements: in the CUDA kernel's loop, or the CPU's inner
  // one.
  StringRef indent = cuda ? "    " : "      ";
  std::string pointers, constants, runStarts, loads, computes, stores;
  DenseMap<Value, std::string> elements;
  for (auto [arg, indexing] : llvm::zip(body.getArguments(), indexings)) {
    unsigned n = arg.getArgNumber();
    std::optional<FusedElementAccess> access =
        declareFusedInput(arg, cuda, pointers);
    if (!access)
      continue;
    elements[arg] = "a" + std::to_string(n);
    auto load = [&](StringRef index) {
      return access->widen(("in" + Twine(n) + "[" + index + "]").str());
    };
    if (indexing.count == 1)
      constants += llvm::formatv("  const {0} a{1} = {2};\n", access->valueType,
                                 n, load("0"));
    else if (indexing.count == numElements)
      loads += llvm::formatv("{2}const {0} a{1} = {3};\n", access->valueType, n,
                             indent, load("i"));
    else if (cuda)
      loads += llvm::formatv(
          "{2}const {0} a{1} = {3};\n", access->valueType, n, indent,
          load(getBroadcastIndex("i", indexing, numElements)));
    else if (indexing.inner == 1) {
      runStarts += llvm::formatv("    const int64_t at{0} = start % {1} - "
                                 "start;\n",
                                 n, indexing.count);
      loads += llvm::formatv("      const {0} a{1} = {2};\n", access->valueType,
                             n, load(("at" + Twine(n) + " + i").str()));
    } else {
      runStarts += llvm::formatv(
          "    const {0} a{1} = {2};\n", access->valueType, n,
          load(getBroadcastIndex("start", indexing, numElements)));
    }
  }
  FailureOr<FusedDraws> draws = getFusedDraws(fused, numElements);
  if (failed(draws))
    return failure();
  pointers += draws->declarations;
  int computed = 0;
  for (Operation &op : body.without_terminator()) {
    std::string name = "v" + std::to_string(computed++);
    computes +=
        getFusedStatement(op, name, elements, scalar, indent, "i", *draws);
    elements[op.getResult(0)] = name;
  }
  for (auto [n, result] :
       llvm::enumerate(body.getTerminator()->getOperands())) {
    FusedElementAccess access =
        declareFusedResult(result, n, body.getNumArguments(), cuda, pointers);
    stores += llvm::formatv("{2}out{0}[i] = {1};\n", n,
                            access.narrow(elements[result]), indent);
  }
  std::string text;
  if (cuda) {
    text = llvm::formatv(
        "(cuda::FusedOperands<{0}> operands, int64_t numElements) "
        "{{\n",
        fused.getNumOperands() + fused.getNumResults() +
            draws->arguments.size());
    text += pointers + constants +
            "  for (int64_t i = cuda::getFusedLoopStart(); i < numElements; "
            "i += cuda::getFusedLoopStride()) {\n" +
            loads + computes + stores + "  }\n}\n";
  } else {
    std::string runEnd =
        run ? llvm::formatv("std::min<int64_t>(end, (start / {0} + 1) * {0})",
                            run)
                  .str()
            : std::string("end");
    text = "(void *const *data, int64_t begin, int64_t end) {\n" + pointers +
           constants +
           "  for (int64_t start = begin, stop; start < end; "
           "start = stop) {\n    stop = " +
           runEnd + ";\n" + runStarts +
           "#pragma omp simd\n"
           "    for (int64_t i = start; i < stop; ++i) {\n" +
           loads + computes + stores + "    }\n  }\n}\n";
  }
  return getFusedCall(
      fused, text, getFusedOpNames(fused) + " on each element, in registers.",
      *draws, "runFusedLoop", std::to_string(numElements));
}

/// The row ops a fused loop computes (FusibleRowOpInterface).
enum class RowKind { Sum, Mean, Max, Softmax, LogSoftmax };

RowKind getRowKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, RowKind>(op)
      .Case([](SumOp) { return RowKind::Sum; })
      .Case([](MeanOp) { return RowKind::Mean; })
      .Case([](MaxOp) { return RowKind::Max; })
      .Case([](SoftmaxOp) { return RowKind::Softmax; })
      .Case([](LogSoftmaxOp) { return RowKind::LogSoftmax; })
      .Default([](Operation *) -> RowKind {
        llvm_unreachable("not a row op of a fusion group");
      });
}

FailureOr<std::string> Emitter::getFusedRowsCall(FusedOp fused) {
  Block &body = fused.getBody().front();
  SmallVector<int64_t> loop = fused.getLoopShape();
  SmallVector<int64_t> rowShape(loop);
  rowShape.back() = 1;
  int64_t length = loop.back();
  int64_t numElements = ShapedType::getNumElements(loop);
  StringRef scalar = getScalarType(fused.getResult(0).getType());
  bool cuda = info.target == "cuda";
  bool columns = fused.hasColumnSums();
  std::string rowLength = std::to_string(length);
  std::string rowStart = "row * " + rowLength;
  std::string element = "(" + rowStart + " + j)";
  // Each row runs its stages in order: a reduction's pass over the row's
  // elements, computing again the elementwise values it reads; then the pass
  // that writes the results. A reduction's arithmetic is its kernel's
  // (Reduce.cpp: sums in f64, NN.cpp's softmax: the maximum, the
  // exponentials and their sum in f64, each row folded in the row order of
  // cpu/ElementMath.h), so the group computes the unfused ops' bits on the
  // CPU for any thread count. There the values a
  // reduction reads go to a scratch row in a loop that vectorizes (`omp
  // simd`), folded by cpu::sumRow or cpu::maxRow in the order the kernels
  // fold a row (cpu/ElementMath.h), and a softmax's exponentials
  // stay in its scratch row for the passes after it. On the GPU a block
  // takes a row: each thread folds every blockDim.x-th element, then the
  // block combines them (FusedLoop.cuh), a softmax's exponential computed
  // again where it is read.
  //
  // A group with column sums has no row ops: its one pass writes the
  // results and adds the summed values to their columns' sums, which
  // accumulate as the reduce kernel's do, in its column order. On the CPU
  // (cpu/ElementMath.h) a task takes blocks of columns, each over the rows
  // in order, the pass over a row's columns of the block vectorized, sums
  // in f64. On the GPU (BlockReduce.cuh) a block takes tiles of columns, a
  // thread one column's rows of its slice, sums in the result's type (f32,
  // or f64); the slices' sums are then combined.
  std::string loopStart;
  if (columns)
    loopStart = cuda ? "    {\n"
                     : "#pragma omp simd\n    for (int64_t j = first; j < "
                       "stop; ++j) {\n";
  else
    loopStart = cuda ? "    for (int64_t j = threadIdx.x; j < " + rowLength +
                           "; j += blockDim.x) {\n"
                     : "#pragma omp simd\n    for (int64_t j = 0; j < " +
                           rowLength + "; ++j) {\n";
  std::string pointers, constants, scratch, rowStarts, code;
  DenseMap<Value, std::string> names;
  DenseMap<Value, std::string> elementLoads;
  for (BlockArgument arg : body.getArguments()) {
    unsigned n = arg.getArgNumber();
    std::optional<FusedElementAccess> access =
        declareFusedInput(arg, cuda, pointers);
    if (!access)
      continue;
    std::string name = "a" + std::to_string(n);
    names[arg] = name;
    BroadcastIndexing indexing = *getBroadcastIndexing(
        arg.getType().cast<RankedTensorType>().getShape(), loop);
    auto load = [&](StringRef array, StringRef index) {
      return access->widen((array + "[" + index + "]").str());
    };
    std::string in = "in" + std::to_string(n);
    if (indexing.count == 1) {
      constants += llvm::formatv("  const {0} {1} = {2};\n", access->valueType,
                                 name, load(in, "0"));
    } else if (indexing.inner % length == 0) {
      // One value per row (a row value of the group's rows, a column).
      BroadcastIndexing perRow{indexing.inner / length, indexing.count};
      rowStarts += llvm::formatv(
          "    const {0} {1} = {2};\n", access->valueType, name,
          load(in, getBroadcastIndex("row", perRow, numElements / length)));
    } else if (indexing.inner == 1 && indexing.count % length == 0) {
      // A row's elements are contiguous.
      std::string offset =
          indexing.count == numElements
              ? rowStart
              : rowStart + " % " + std::to_string(indexing.count);
      rowStarts +=
          llvm::formatv("    const {0} *__restrict row{1} = {2} + {3};\n",
                        access->type, n, in, offset);
      elementLoads[arg] =
          llvm::formatv("      const {0} {1} = {2};\n", access->valueType, name,
                        load("row" + std::to_string(n), "j"));
    } else {
      elementLoads[arg] = llvm::formatv(
          "      const {0} {1} = {2};\n", access->valueType, name,
          load(in, getBroadcastIndex(element, indexing, numElements)));
    }
  }
  FailureOr<FusedDraws> draws = getFusedDraws(fused, numElements);
  if (failed(draws))
    return failure();
  pointers += draws->declarations;

  auto isRowValue = [&](Value value) {
    return value.getType().cast<RankedTensorType>().getShape() ==
           ArrayRef(rowShape);
  };
  DenseMap<Operation *, std::string> opNames;
  int counter = 0;
  for (Operation &op : body.without_terminator()) {
    opNames[&op] = "v" + std::to_string(counter++);
    names[op.getResult(0)] = opNames[&op];
  }
  // A softmax's element, after its stages: on the CPU from its scratch row
  // (`s`: the exponentials, or the inputs of a log-softmax); on the GPU from
  // its input's element, computed again.
  auto getSoftmaxStatement = [&](Operation &op) {
    std::string k = opNames[&op].substr(1);
    std::string input = cuda ? names[op.getOperand(0)] : "s" + k + "[j]";
    if (getRowKind(&op) == RowKind::LogSoftmax)
      return llvm::formatv("      const {0} v{1} = {2} - max{1} - logSum{1};\n",
                           scalar, k, input)
          .str();
    if (cuda)
      input = "cuda::applyUnary<UnaryKind::Exp>(" + input + " - max" + k + ")";
    return llvm::formatv("      const {0} v{1} = {2} * scale{1};\n", scalar, k,
                         input)
        .str();
  };
  // The statements of a pass over a row's elements that give `targets`: the
  // operands' loads and the ops between, in the group's order.
  auto getElementStatements = [&](ArrayRef<Value> targets) {
    llvm::SmallPtrSet<Operation *, 16> needed;
    llvm::SmallPtrSet<Value, 8> loaded;
    SmallVector<Value> pending(targets);
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      if (value.isa<BlockArgument>()) {
        loaded.insert(value);
        continue;
      }
      Operation *op = value.getDefiningOp();
      if (isRowValue(value) || !needed.insert(op).second)
        continue;
      if (!isa<FusibleRowOpInterface>(op) || cuda)
        llvm::append_range(pending, op->getOperands());
    }
    std::string text;
    for (BlockArgument arg : body.getArguments())
      if (loaded.contains(arg))
        text += elementLoads.lookup(arg);
    for (Operation &op : body.without_terminator()) {
      if (!needed.contains(&op))
        continue;
      if (isa<FusibleRowOpInterface>(op))
        text += getSoftmaxStatement(op);
      else
        text += getFusedStatement(op, opNames[&op], names, scalar, "      ",
                                  element, *draws);
    }
    return text;
  };
  // INFINITY (math.h), which device code may use as host code does.
  std::string negativeInfinity = "-INFINITY";
  // The row's maximum of `input`, declared as `max`.
  auto getMaxStage = [&](Value input, StringRef max, StringRef scratch) {
    if (cuda)
      return llvm::formatv("    {0} {1} = {2};\n", scalar, max,
                           negativeInfinity)
                 .str() +
             loopStart + getElementStatements(input) +
             llvm::formatv("      {0} = cuda::maxPropagatingNaN({1}, {0});\n"
                           "    }\n    {0} = cuda::maxFusedRow({0});\n",
                           max, names[input])
                 .str();
    return loopStart + getElementStatements(input) +
           llvm::formatv("      {0}[j] = {1};\n    }\n"
                         "    const {2} {3} = cpu::maxRow({0}, {4});\n",
                         scratch, names[input], scalar, max, rowLength)
               .str();
  };
  for (Operation &op : body.without_terminator()) {
    std::string k = opNames[&op].substr(1);
    if (isColumnSum(&op))
      continue;
    if (!isa<FusibleRowOpInterface>(op)) {
      // An elementwise op of the rows: once per row.
      if (isRowValue(op.getResult(0)))
        code += getFusedStatement(op, opNames[&op], names, scalar, "    ",
                                  "row", *draws);
      continue;
    }
    Value input = op.getOperand(0);
    std::string s = "s" + k;
    if (!cuda)
      scratch += llvm::formatv("  std::vector<{0}> scratch{1}({2});\n"
                               "  {0} *__restrict {3} = scratch{1}.data();\n",
                               scalar, k, rowLength, s);
    RowKind kind = getRowKind(&op);
    if (kind == RowKind::Max) {
      code += getMaxStage(input, "acc" + k, s);
      code += llvm::formatv("    const {0} v{1} = acc{1};\n", scalar, k);
      continue;
    }
    if (kind == RowKind::Sum || kind == RowKind::Mean) {
      if (cuda)
        code += llvm::formatv("    double acc{0} = 0;\n", k).str() + loopStart +
                getElementStatements(input) +
                llvm::formatv("      acc{0} += {1};\n    }\n"
                              "    acc{0} = cuda::sumFusedRow(acc{0});\n",
                              k, names[input])
                    .str();
      else
        code +=
            loopStart + getElementStatements(input) +
            llvm::formatv("      {0}[j] = {1};\n    }\n"
                          "    const double acc{2} = cpu::sumRow({0}, {3});\n",
                          s, names[input], k, rowLength)
                .str();
      code += llvm::formatv(
          "    const {0} v{1} = {0}(acc{1}{2});\n", scalar, k,
          kind == RowKind::Mean ? " / double(" + rowLength + ")" : "");
      continue;
    }
    // A softmax: the maximum, then the sum of the exponentials.
    code += getMaxStage(input, "max" + k, s);
    if (cuda) {
      code += llvm::formatv("    double sum{0} = 0;\n", k).str() + loopStart +
              getElementStatements(input) +
              llvm::formatv("      sum{0} += cuda::applyUnary<UnaryKind::Exp>"
                            "({1} - max{0});\n    }\n"
                            "    sum{0} = cuda::sumFusedRow(sum{0});\n",
                            k, names[input])
                  .str();
    } else {
      // A log-softmax keeps its inputs, a softmax the exponentials.
      std::string exps = s;
      if (kind == RowKind::LogSoftmax) {
        exps = "e" + k;
        scratch += llvm::formatv("  std::vector<{0}> exps{1}({2});\n"
                                 "  {0} *__restrict {3} = exps{1}.data();\n",
                                 scalar, k, rowLength, exps);
      }
      code +=
          loopStart +
          llvm::formatv("      {0}[j] = cpu::applyUnary<UnaryKind::Exp>"
                        "({1}[j] - max{2});\n    }\n"
                        "    const double sum{2} = cpu::sumRow({0}, {3});\n",
                        exps, s, k, rowLength)
              .str();
    }
    if (kind == RowKind::LogSoftmax)
      code += llvm::formatv("    const {0} logSum{1} = {0}({2}(sum{1}));\n",
                            scalar, k, cuda ? "log" : "std::log");
    else
      code += llvm::formatv("    const {0} scale{1} = {0}(1.0 / sum{1});\n",
                            scalar, k);
  }
  // The results: the loop's in a last pass, the rows' once per row, the
  // columns' sums after the rows.
  SmallVector<Value> elementValues;
  std::string stores, rowStores, sumStarts, sumStores;
  // On the GPU each split of the rows keeps `partialBytes` of partial sums:
  // each sum's accumulators of every column, the sums' one after the other
  // (8-byte aligned); the finishing kernel adds them in split order.
  int64_t partialBytes = 0;
  std::string finishPointers, finishCode;
  for (auto [n, result] :
       llvm::enumerate(body.getTerminator()->getOperands())) {
    std::string declaration;
    FusedElementAccess access = declareFusedResult(
        result, n, body.getNumArguments(), cuda, declaration);
    pointers += declaration;
    if (Operation *sum = result.getDefiningOp(); sum && isColumnSum(sum)) {
      Value summed = sum->getOperand(0);
      elementValues.push_back(summed);
      std::string k = opNames[sum].substr(1);
      if (cuda) {
        StringRef sumType = getScalarType(result.getType());
        int64_t offset = partialBytes;
        int64_t bytes =
            length *
            result.getType().cast<RankedTensorType>().getElementTypeBitWidth() /
            8;
        partialBytes += (bytes + 7) / 8 * 8;
        // Column j's partial sum of split {0}: written by the kernel, read
        // by the finishing kernel (`const`).
        std::string partial = llvm::formatv(
            "reinterpret_cast<{{1}{0} *>(partials + {{0} + {1})[j]", sumType,
            offset);
        std::string finished =
            access.narrow(access.valueType + "(acc" + k + ")");
        sumStarts += llvm::formatv("    {0} acc{1} = 0;\n", sumType, k);
        stores += llvm::formatv("      acc{0} += {1}({2});\n", k, sumType,
                                names[summed]);
        sumStores += llvm::formatv(
            "    acc{0} = cuda::sumColumnSlices(acc{0});\n"
            "    if (cuda::getColumnSlice() == 0 && j < {1}) {{\n"
            "      if (gridDim.y == 1)\n"
            "        out{2}[j] = {3};\n"
            "      else\n"
            "        {4} = acc{0};\n"
            "    }\n",
            k, rowLength, n, finished,
            llvm::formatv(partial.c_str(),
                          "int64_t(blockIdx.y) * kPartialBytes", "")
                .str());
        finishPointers += declaration;
        finishCode += llvm::formatv(
            "    {0} acc{1} = {2};\n"
            "    for (int split = 1; split < splits; ++split)\n"
            "      acc{1} += {3};\n"
            "    out{4}[j] = {5};\n",
            sumType, k, llvm::formatv(partial.c_str(), "0", "const ").str(),
            llvm::formatv(partial.c_str(), "split * kPartialBytes", "const ")
                .str(),
            n, finished);
      } else {
        sumStarts +=
            llvm::formatv("    double acc{0}[cpu::kColumnBlock] = {{};\n", k);
        stores += llvm::formatv("      acc{0}[j - first] += double({1});\n", k,
                                names[summed]);
        sumStores += llvm::formatv(
            "    for (int64_t j = first; j < stop; ++j)\n"
            "      out{0}[j] = {1};\n",
            n, access.narrow(access.valueType + "(acc" + k + "[j - first])"));
      }
      continue;
    }
    if (isRowValue(result)) {
      rowStores += llvm::formatv("{0}    out{1}[row] = {2};\n",
                                 cuda ? "    if (threadIdx.x == 0)\n  " : "", n,
                                 access.narrow(names[result]));
      continue;
    }
    elementValues.push_back(result);
    stores += llvm::formatv("      out{0}[{1}] = {2};\n", n, element,
                            access.narrow(names[result]));
  }
  if (!elementValues.empty())
    code +=
        loopStart + getElementStatements(elementValues) + stores + "    }\n";
  code += rowStores;

  std::string comment = getFusedOpNames(fused) + " row by row (rows of " +
                        rowLength + " elements), in registers.";
  // The CUDA kernel's parameters, then the group's pointers and constants.
  std::string cudaOperands = llvm::formatv(
      "cuda::FusedOperands<{0}> operands",
      fused.getNumOperands() + fused.getNumResults() + draws->arguments.size());
  std::string cudaStart =
      "(" + cudaOperands + ", int64_t numRows) {\n" + pointers + constants;
  if (columns) {
    comment = getFusedOpNames(fused) + " by blocks of columns, each over the " +
              std::to_string(numElements / length) + " rows of " + rowLength +
              " elements in order, in registers; the column sums in the " +
              "reduce kernel's order.";
    std::string partialBytesConstant = llvm::formatv(
        "  constexpr int64_t kPartialBytes = {0};\n", partialBytes);
    std::string text =
        cuda ? "(" + cudaOperands + ", int64_t numRows, char *partials) {\n" +
                   pointers + constants + partialBytesConstant +
                   "  // The rows of this split (blockIdx.y).\n"
                   "  int64_t begin, end;\n"
                   "  cuda::getSplitRange(numRows, gridDim.y, blockIdx.y, "
                   "begin, end);\n"
                   "  for (int64_t tile = blockIdx.x; tile * cuda::kColumnTile "
                   "< " +
                   rowLength +
                   "; tile += gridDim.x) {\n"
                   "    const int64_t j = tile * cuda::kColumnTile + "
                   "cuda::getColumnLane();\n" +
                   sumStarts +
                   "    for (int64_t row = begin + "
                   "cuda::getColumnSlice(); j < " +
                   rowLength + " && row < end; row += cuda::kColumnSlices) {\n"
             : "(void *const *data, int64_t begin, int64_t end) {\n" +
                   pointers + constants +
                   "  for (int64_t block = begin; block < end; ++block) {\n"
                   "    const cpu::ColumnBlock columns = "
                   "cpu::getColumnBlock(block, " +
                   rowLength +
                   ");\n"
                   "    const int64_t first = columns.first;\n"
                   "    const int64_t stop = first + columns.width;\n" +
                   sumStarts + "    for (int64_t row = 0; row < " +
                   std::to_string(numElements / length) + "; ++row) {\n";
    // The row's statements, one loop deeper than a row group's.
    std::string rowCode = rowStarts + code;
    for (StringRef line : llvm::split(rowCode, '\n'))
      if (!line.empty())
        text += (line.starts_with("#") ? "" : "  ") + line.str() + "\n";
    text += "    }\n" + sumStores + "  }\n}\n";
    std::string finishText;
    if (cuda)
      finishText =
          "(" + cudaOperands + ", int splits, const char *partials) {\n" +
          finishPointers + partialBytesConstant +
          "  for (int64_t j = cuda::getFusedLoopStart(); j < " + rowLength +
          "; j += cuda::getFusedLoopStride()) {\n" + finishCode + "  }\n}\n";
    return getFusedCall(fused, text, comment, *draws, "runFusedColumns",
                        std::to_string(numElements / length) + ", " + rowLength,
                        finishText, partialBytes);
  }

  std::string text =
      cuda ? cudaStart +
                 "  for (int64_t row = blockIdx.x; row < numRows; row += "
                 "gridDim.x) {\n"
           : "(void *const *data, int64_t begin, int64_t end) {\n" + pointers +
                 constants + scratch +
                 "  for (int64_t row = begin; row < end; ++row) {\n";
  text += rowStarts + code + "  }\n}\n";
  return getFusedCall(fused, text, comment, *draws, "runFusedRows",
                      std::to_string(numElements / length) + ", " + rowLength);
}

LogicalResult Emitter::emitOp(Operation *op, std::string &body) {
  pendingViews.clear();
  FailureOr<std::string> call = getKernelCall(op);
  if (failed(call))
    return failure();
  std::string path = getCallPath(op);
  std::string comment = path.empty() ? "(root)" : quoteForCpp(path);
  if (scope->shared) {
    // The body runs for several blocks: paths are relative to the block.
    StringRef inBlock = StringRef(path).drop_front(scope->blockPath.size());
    inBlock.consume_front(".");
    comment = inBlock.empty() ? "(block)" : quoteForCpp(inBlock);
  }
  // slapo-checkpoint's clones say so: the forward op computed again.
  if (op->hasAttr(kRecomputedAttrName))
    comment += " (recomputed)";
  std::string what = op->getName().stripDialect().str();
  if (auto fused = dyn_cast<FusedOp>(op)) {
    // The schedule's fusion kind that made the group, if any.
    if (std::optional<StringRef> kind = fused.getKind())
      what += " by fuse(\"" + kind->str() + "\")";
    what += " (";
    for (Operation &inner : fused.getBody().front().without_terminator())
      what += (&inner == &fused.getBody().front().front() ? "" : ", ") +
              inner.getName().stripDialect().str();
    what += ")";
  }
  body += "\n  // " + comment + ": " + what + "\n" + pendingViews + "  " +
          *call + ";\n";
  return success();
}

SmallVector<Segment> Emitter::getSegments(Phase phase) {
  SmallVector<Segment> segments;
  for (Operation &op : step.getBody().front()) {
    if (getEmittedPhase(&op, interleaved) != phase || !needsCall(&op))
      continue;
    std::string path = getCallPath(&op);
    StringRef blockPath = getBlockPath(path);
    if (segments.empty() || segments.back().blockPath != blockPath)
      segments.push_back({blockPath.str(), {}});
    segments.back().ops.push_back(&op);
  }
  return segments;
}

FailureOr<std::string>
Emitter::getSharedBody(const Segment &segment,
                       SmallVector<int64_t> &slotValues) {
  FunctionScope shared;
  shared.shared = true;
  shared.blockPath = segment.blockPath;
  FunctionScope *enclosing = std::exchange(scope, &shared);
  auto restore = llvm::make_scope_exit([&] { scope = enclosing; });
  std::string body;
  for (Operation *op : segment.ops)
    if (failed(emitOp(op, body)))
      return failure();
  slotValues = std::move(shared.slotValues);
  return body;
}

/// "{0, 64, 128}": a row of a shared body's table, ten offsets a line.
std::string offsetRow(ArrayRef<int64_t> offsets) {
  std::string text = "{";
  for (auto [i, offset] : llvm::enumerate(offsets))
    text += (i == 0 ? "" : i % 10 ? ", " : ",\n     ") + std::to_string(offset);
  return text + "}";
}

LogicalResult Emitter::emitPhase(StringRef name, Phase phase) {
  SmallVector<Segment> segments = getSegments(phase);
  // Blocks whose calls are written alike but for their tensors' offsets run
  // one function: equal bodies are the same kernels on tensors of the same
  // types with the same attributes, whatever the blocks are named.
  struct SharedFunction {
    std::string body;
    SmallVector<size_t> segments;
    SmallVector<SmallVector<int64_t>> rows;
  };
  std::vector<SharedFunction> candidates;
  llvm::StringMap<size_t> candidateOfBody;
  for (auto [index, segment] : llvm::enumerate(segments)) {
    if (segment.blockPath.empty() || segment.ops.size() < kMinSharedCalls)
      continue;
    SmallVector<int64_t> row;
    FailureOr<std::string> body = getSharedBody(segment, row);
    if (failed(body))
      return failure();
    auto [it, inserted] = candidateOfBody.try_emplace(*body, candidates.size());
    if (inserted)
      candidates.push_back({*body, {}, {}});
    candidates[it->second].segments.push_back(index);
    candidates[it->second].rows.push_back(std::move(row));
  }
  // The call each segment of a shared function becomes.
  DenseMap<size_t, std::string> calls;
  int numFunctions = 0;
  for (const SharedFunction &function : candidates) {
    if (function.segments.size() < 2)
      continue;
    std::string functionName = (name + "Block" + Twine(numFunctions++)).str();
    std::string table = "k" + capitalize(functionName);
    os << "/// at[0], at[1], ... of " << functionName << " (blocks" << extension
       << ") for each block it runs:\n"
       << "/// the offsets of its tensors (and the streams of its dropouts).\n"
       << "const int64_t " << table << "[" << function.rows.size() << "]["
       << function.rows.front().size() << "] = {\n";
    for (auto [row, index] : llvm::enumerate(function.segments)) {
      os << "    // " << quoteForCpp(segments[index].blockPath) << "\n"
         << "    " << offsetRow(function.rows[row]) << ",\n";
      calls[index] = llvm::formatv("{0}(ctx, mesh, arena, step, {1}[{2}])",
                                   functionName, table, row)
                         .str();
    }
    os << "};\n\n";
    std::string signature =
        "void " + functionName +
        "(Context &ctx, ProcessMesh &mesh, uint8_t *arena, int64_t step, "
        "const int64_t *at)";
    blockDeclarations += signature + ";\n";
    blockFunctions += "/// The " + name.str() + " of each block of " + table +
                      " (step" + extension +
                      "): the same calls, on that block's " + "tensors.\n" +
                      signature + " {" + function.body + "}\n\n";
  }

  // Reads of persistent and earlier tensors are views too: declare them on
  // first use like any other value.
  FunctionScope phaseScope;
  scope = &phaseScope;
  std::string body;
  for (auto [index, segment] : llvm::enumerate(segments)) {
    auto call = calls.find(index);
    if (call != calls.end()) {
      body += "\n  // " + quoteForCpp(segment.blockPath) + "\n  " +
              call->second + ";\n";
      continue;
    }
    for (Operation *op : segment.ops)
      if (failed(emitOp(op, body)))
        return failure();
  }
  os << phaseSignature(name) << body << "}\n\n";
  return success();
}

/// The phases must follow each other: forward, then backward, then
/// optimizer, as the passes build them (forward and backward as one where
/// they interleave).
LogicalResult checkPhaseOrder(func::FuncOp step, bool interleaved) {
  Phase last = Phase::Forward;
  for (Operation &op : step.getBody().front().without_terminator()) {
    Phase phase = getEmittedPhase(&op, interleaved);
    if (phase < last && !isa<ConstantOp>(op))
      return op.emitError("code generation: this op of an earlier phase "
                          "follows ops of a later one");
    last = std::max(last, phase);
  }
  return success();
}

void Emitter::emitTables() {
  auto slot = [&](StringRef name, Type type, int64_t offset,
                  ParamOp shardOf = ParamOp()) {
    auto tensor = type.cast<RankedTensorType>();
    std::string shard;
    if (shardOf && shardOf.getShardAxis())
      shard = llvm::formatv(", /*shardAxis=*/{0}, /*shardChunks=*/{1}",
                            *shardOf.getShardAxis(),
                            shardOf.getShardChunks().value_or(1));
    return llvm::formatv("{{{0}, {1}, {2}, {3}{4}}", quoteForCpp(name),
                         *getDType(tensor.getElementType()),
                         shapeInitializer(tensor.getShape()), offset, shard)
        .str();
  };
  auto paramNamed = [&](StringRef name) {
    return module.lookupSymbol<ParamOp>(name);
  };
  auto table = [&](StringRef name, StringRef type, ArrayRef<std::string> rows) {
    if (rows.empty())
      return;
    os << "const " << type << " " << name << "[] = {\n";
    for (const std::string &row : rows)
      os << "    " << row << ",\n";
    os << "};\n";
  };
  SmallVector<std::string> params, states, grads, inputs;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<ParamOp>(op))
      params.push_back(slot(param.getSymName(), param.getType(),
                            symbolOffsets.lookup(param.getSymNameAttr()),
                            param));
    else if (auto state = dyn_cast<OptimizerStateOp>(op))
      states.push_back(slot(state.getSymName(), state.getType(),
                            symbolOffsets.lookup(state.getSymNameAttr()),
                            paramNamed(state.getOf())));
  }
  Block &block = step.getBody().front();
  for (auto grad : block.getOps<ParamGradOp>())
    grads.push_back(slot(grad.getParam(), grad.getGrad().getType(),
                         offsets[grad.getGrad()], paramNamed(grad.getParam())));
  unsigned numInputs = block.getNumArguments() - 2;
  int64_t tokensPerStep = 0;
  for (BlockArgument arg : block.getArguments().take_front(numInputs)) {
    auto name =
        step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "slapo.name");
    std::optional<IndexRange> range = getIndexRange(arg);
    std::string ignored =
        range && range->ignored ? ", " + std::to_string(*range->ignored) : "";
    inputs.push_back(llvm::formatv(
        "{{{0}, {1}{2}}",
        slot(name ? name.getValue() : "", arg.getType(), offsets[arg]),
        range ? range->rows : 0, ignored));
    auto type = arg.getType().cast<RankedTensorType>();
    // Throughput counts the tokens of the first input that indexes a table
    // (the token ids), else the samples of the first input.
    if (range && tokensPerStep == 0)
      tokensPerStep = type.getNumElements();
  }
  if (tokensPerStep == 0 && numInputs > 0) {
    auto first = block.getArgument(0).getType().cast<RankedTensorType>();
    tokensPerStep = first.getRank() ? first.getDimSize(0) : 1;
  }
  table("kParams", "ArenaSlot", params);
  table("kOptimizerState", "ArenaSlot", states);
  table("kGradients", "ArenaSlot", grads);
  table("kInputs", "InputSlot", inputs);

  auto memory = module->getAttrOfType<DictionaryAttr>(kMemoryAttrName);
  auto bytes = [&](StringRef key) {
    return memory.getAs<IntegerAttr>(key).getInt();
  };
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  auto count = [](ArrayRef<std::string> rows, StringRef name) {
    return rows.empty() ? std::string("nullptr, 0")
                        : llvm::formatv("{0}, {1}", name, rows.size()).str();
  };
  os << "\nconst ProgramDesc kProgram = {\n"
     << "    /*modelName=*/" << quoteForCpp(info.modelName) << ",\n"
     << "    /*fingerprint=*/\"" << getProgramFingerprint(module) << "\",\n"
     << "    /*dp=*/" << info.dp << ", /*tp=*/" << info.tp << ", /*pp=*/"
     << info.pp << ", /*stage=*/" << info.stage << ", /*seed=*/kSeed,\n"
     << llvm::formatv("    /*memory=*/{{/*weights=*/{0}, /*optimizerState=*/"
                      "{1}, /*inputs=*/{2}, /*constants=*/{3}, /*gradients=*/"
                      "{4}, /*activations=*/{5}, /*temporaries=*/{6}, "
                      "/*workspaces=*/{7}, /*arenaBytes=*/{8}},\n",
                      bytes("weights"), bytes("optimizer_state"),
                      bytes("inputs"), bytes("constants"), bytes("gradients"),
                      bytes("activations"), bytes("temporaries"),
                      bytes("workspaces"), bytes("arena_bytes"))
     << "    " << count(params, "kParams") << ",\n"
     << "    " << count(states, "kOptimizerState") << ",\n"
     << "    " << count(grads, "kGradients") << ",\n"
     << "    " << count(inputs, "kInputs") << ",\n"
     << "    /*step=*/"
     << slot("step", block.getArgument(numInputs).getType(),
             offsets[block.getArgument(numInputs)])
     << ",\n    /*totalSteps=*/"
     << slot("total_steps", block.getArgument(numInputs + 1).getType(),
             offsets[block.getArgument(numInputs + 1)])
     << ",\n    /*loss=*/"
     << slot("loss", ret.getOperand(0).getType(), offsets[ret.getOperand(0)])
     << ",\n    /*learningRate=*/"
     << slot("lr", ret.getOperand(1).getType(), offsets[ret.getOperand(1)])
     << ",\n    /*tokensPerStep=*/" << tokensPerStep * info.dp << ",\n"
     << "    initialize, forward, backward, optimizer,\n"
     << "    slapo::rt::" << info.target << "::createDevice,\n};\n";
}

FailureOr<std::vector<SourceFile>> Emitter::emit() {
  if (failed(nameValues()) || failed(checkPhaseOrder(step, interleaved)) ||
      failed(emitConstants()) || failed(emitPhase("forward", Phase::Forward)) ||
      failed(emitPhase("backward", Phase::Backward)) ||
      failed(emitPhase("optimizer", Phase::Optimizer)))
    return failure();
  emitTables();

  std::string stageText =
      info.pp == 1
          ? std::string()
          : llvm::formatv(" x pp={0}, pipeline stage {1},", info.pp, info.stage)
                .str();
  std::string header =
      llvm::formatv("// Generated by slapoc: the training step of each rank "
                    "of mesh dp={0} x tp={1}{3} for\n// {2}.\n"
                    "// Every tensor is a view at its planned offset of the "
                    "rank's arena; the\n// runtime's driver (runTrainingMain) "
                    "runs the phases.\n",
                    info.dp, info.tp, quoteForCpp(info.modelName), stageText);
  std::string includes =
      "#include \"slapo/runtime/Collectives.h\"\n"
      "#include \"slapo/runtime/Program.h\"\n"
      "#include \"slapo/runtime/" +
      info.target + "/Kernels.h\"\n" +
      (fusedLoops.empty() ? ""
       : info.target == "cuda"
           ? "#include \"slapo/runtime/cuda/FusedLoop.cuh\"\n"
           : "#include \"slapo/runtime/cpu/FusedLoop.h\"\n") +
      "\n"
      "#include <array>\n#include <cstdint>\n#include <limits>\n\n";
  std::string definitions =
      "using namespace slapo::rt;\n"
      "// The kernels are those of this Context's backend, found by argument-\n"
      "// dependent lookup: the code is the same for every device.\n"
      "using slapo::rt::" +
      info.target +
      "::Context;\n\n"
      "/// train(seed=): the seed of sampled data and of dropout masks.\n"
      "constexpr uint64_t kSeed = " +
      std::to_string(info.seed) + "u;\n\n";
  std::string viewFunction =
      "Tensor view(uint8_t *arena, int64_t offset, DType dtype, Shape shape) "
      "{\n  return Tensor(arena + offset, dtype, shape);\n}\n\n";
  // The fused loops are inline: blocks.cpp's functions call them too.
  if (!fusedLoops.empty())
    viewFunction +=
        "// The loops of the fusion groups (slapo.fused).\n" + fusedLoops;
  std::string program = programText + "\n} // namespace\n\n" +
                        "int main(int argc, char **argv) {\n"
                        "  return slapo::rt::runTrainingMain(kProgram, argc, "
                        "argv);\n}\n";
  if (blockFunctions.empty())
    return std::vector<SourceFile>{
        {"step" + extension, header + includes + "namespace {\n\n" +
                                 definitions + viewFunction + program}};
  // The functions blocks share are a translation unit of their own, compiled
  // beside step.cpp's.
  return std::vector<SourceFile>{
      {"step" + extension,
       header + "#include \"step.h\"\n\nnamespace {\n" + program},
      {"step.h",
       "// Generated by slapoc: what step" + extension + " and blocks" +
           extension + " share.\n" + "#pragma once\n\n" + includes +
           definitions + "inline " + viewFunction + "// blocks" + extension +
           ", called by step" + extension + ".\n" + blockDeclarations},
      {"blocks" + extension,
       "// Generated by slapoc: the functions that blocks of module lists "
       "share,\n// each called per block with a row of its table in step" +
           extension + ".\n#include \"step.h\"\n\n" + blockFunctions}};
}

} // namespace

FailureOr<std::vector<SourceFile>>
emitRankProgram(ModuleOp module, const RankProgramInfo &info) {
  auto step = module.lookupSymbol<func::FuncOp>(kTrainStepName);
  if (!step || !module->hasAttr(kMemoryAttrName)) {
    module.emitError("code generation needs @")
        << kTrainStepName << " with a memory plan (slapo-optimizer, "
        << "slapo-plan-memory)";
    return failure();
  }
  return Emitter(module, step, info).emit();
}

} // namespace slapo
