//===- Importer.h - state shared by the TorchScript importer ----*- C++ -*-===//
//
// The importer walks the forward graph and every graph it calls, evaluating
// what is known at compile time (constants, shapes, module attributes, control
// flow on constants) and emitting slapo ops for tensor computation. Each
// TorchScript value maps to a `Known`; tensors carry a shadow on the meta
// device, so result shapes and dtypes come from ATen itself rather than from
// a second implementation of PyTorch's shape and type-promotion rules.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_FRONTEND_TORCHSCRIPT_IMPORTER_H
#define SLAPO_FRONTEND_TORCHSCRIPT_IMPORTER_H

#include "slapo/Dialect/SlapoOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

namespace slapo {
struct TorchScriptModel::Impl {
  std::string path;
  torch::jit::Module module;
};

/// Keeps a module's buffers as they are while it lives: a forward in
/// training mode writes some (BatchNorm's running statistics), and the
/// model's state must stay as saved for what reads it after a check.
class KeepBuffers {
public:
  explicit KeepBuffers(torch::jit::Module &module) {
    for (const auto &buffer : module.named_buffers(/*recurse=*/true))
      saved.emplace_back(buffer.value, buffer.value.clone());
  }
  ~KeepBuffers() {
    at::NoGradGuard noGrad;
    for (auto &[buffer, value] : saved)
      buffer.copy_(value);
  }

private:
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
};

/// What the IR's `forward` computes, computed by LibTorch: the model's forward
/// of `inputs`, and the loss train(loss=) appended to it (TrainingLoss.h),
/// whose targets are then the last input.
c10::IValue callForward(torch::jit::Module &module, mlir::func::FuncOp forward,
                        llvm::ArrayRef<at::Tensor> inputs);

/// Checks that the archive at `path`, which torch::jit::load read into
/// `module`, holds every byte of each tensor attribute of the module and its
/// submodules (parameters, buffers): LibTorch 1.13 sizes a storage by the
/// element count its pickle records, not by its record in the archive, so a
/// record cut short leaves the rest of the tensor whatever memory followed.
/// The Error names the tensor, its record and both sizes.
llvm::Error checkTensorRecords(const std::string &path,
                               const torch::jit::Module &module);
} // namespace slapo

namespace slapo::torchscript {

namespace jit = torch::jit;

/// One step that reads a view from the tensor it views. Every step can also
/// be run backwards: an updated view is written into the tensor it came from,
/// which is how in-place writes through views keep value semantics.
struct ViewStep {
  enum class Kind {
    Slice,     // input[start:end:step] along dim
    Reshape,   // the same elements in row-major order, shape `sizes`
    Permute,   // result dim i is input dim sizes[i]
    Broadcast, // expanded to shape `sizes` (strides 0 in eager PyTorch)
  };
  Kind kind;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  llvm::SmallVector<int64_t> sizes;

  static ViewStep slice(int64_t dim, int64_t start, int64_t end, int64_t step);
  static ViewStep reshape(llvm::ArrayRef<int64_t> shape);
  static ViewStep permute(llvm::ArrayRef<int64_t> permutation);
  static ViewStep broadcast(llvm::ArrayRef<int64_t> shape);
};
using ViewPath = std::vector<ViewStep>;

/// `tensor` read through `steps`: a view of it, as PyTorch makes one.
at::Tensor applyView(llvm::ArrayRef<ViewStep> steps, at::Tensor tensor);
/// `value` read through `steps`, as slapo ops built at `loc`.
mlir::Value applyView(mlir::OpBuilder &builder, mlir::Location loc,
                      llvm::ArrayRef<ViewStep> steps, mlir::Value value);

/// The memory that a tensor and all its views share, as in eager PyTorch. An
/// in-place write through any of them gives the storage a new value; each
/// of them reads its own part of that value afterwards.
struct TensorStorage {
  /// While every write was made at compile time: the tensor that owns the
  /// storage. Its compile-time views share its memory, so compile-time writes
  /// reach them as they would in eager PyTorch. Undefined after a runtime
  /// write.
  at::Tensor constant;
  /// Otherwise: the value of the owning tensor in the IR.
  mlir::Value value;
  /// Counts runtime writes; a view read before a write is read again after.
  unsigned version = 0;
  /// The name of the parameter or buffer held, if any, and the buffer's
  /// symbol if it is one. A buffer may be written: the step then updates it
  /// (slapo.update_buffer); a trained parameter may not.
  std::string parameter;
  ParamOp buffer;
  /// The op, module and Python line of the last runtime write, for messages.
  std::string lastWrite;
};

/// What the importer knows about one TorchScript value.
struct Known {
  enum class Kind {
    Poison,    // produced after an error; uses report nothing further
    Tensor,    // a tensor, known at compile time or not (see isConstant)
    Constant,  // a compile-time value that is not a tensor (number, list...)
    Module,    // a submodule, with its dotted path
    Aggregate, // a list or tuple whose elements are known individually
  };
  Kind kind = Kind::Poison;
  /// Constant: the value. Tensor: its compile-time value while isConstant().
  c10::IValue constant;
  /// Tensor: its storage, and the steps that read it from the storage's
  /// owner. `opaqueView` names the op that made a view no steps describe
  /// (set, the tensor can be read only while its storage was never written at
  /// run time).
  std::shared_ptr<TensorStorage> storage;
  ViewPath view;
  std::string opaqueView;
  /// Tensor: on the meta device, with the sizes and strides of eager PyTorch.
  at::Tensor shadow;
  /// Tensor: the IR value last read (Importer::read), and the storage version
  /// it was read at.
  mutable mlir::Value lastRead;
  mutable unsigned lastReadVersion = 0;
  std::optional<jit::Module> module;
  std::string modulePath;
  /// Aggregate: shared by every copy, as Python shares a list, so that an
  /// append reaches every holder.
  std::shared_ptr<std::vector<Known>> elements;

  static Known poison() { return Known(); }
  /// A runtime tensor with a storage of its own.
  static Known ofTensor(mlir::Value value, at::Tensor shadow);
  /// A compile-time value; tensors get a storage of their own, and lists and
  /// tuples holding tensors become aggregates.
  static Known ofConstant(c10::IValue value);
  static Known ofModule(jit::Module module, std::string path);
  static Known ofAggregate(std::vector<Known> elements);
  /// A view of `base` read by `steps`, with shadow `shadow`.
  static Known viewOf(const Known &base, llvm::ArrayRef<ViewStep> steps,
                      at::Tensor shadow);

  bool is(Kind k) const { return kind == k; }
  /// True for constants, tensors whose storage has only compile-time values,
  /// and aggregates made only of those.
  bool isConstant() const;
};

/// The values of one invocation of a graph; a method called twice (two
/// layers of one class) gets two frames.
struct Frame {
  Frame(std::string modulePath, mlir::Location callSite)
      : modulePath(std::move(modulePath)), callSite(callSite) {}

  std::string modulePath;
  /// Where the graph was called from: the location of nodes that have no
  /// Python source of their own nor a neighbour that has one.
  mlir::Location callSite;
  llvm::DenseMap<const jit::Value *, Known> values;

  /// Marks every output of `node` as produced after an error.
  void poisonOutputs(const jit::Node *node) {
    for (const jit::Value *output : node->outputs())
      values[output] = Known::poison();
  }
};

class Importer;

/// One run of a node's operator: the tensors it was given (with the known
/// values they stand for) and the values it returned.
struct OperatorRun {
  std::vector<std::pair<Known, at::Tensor>> tensorInputs;
  std::vector<c10::IValue> results;
};

/// The view a lowering function has of the node it lowers.
class NodeLowering {
public:
  NodeLowering(Importer &importer, jit::Node *node, Frame &frame,
               std::vector<Known> outputShadows);

  jit::Node *getNode() const { return node; }
  mlir::Location getLoc() const { return loc; }
  mlir::OpBuilder &getBuilder();
  mlir::MLIRContext *getContext();

  const Known &input(size_t i) const;
  size_t numInputs() const { return node->inputs().size(); }
  bool isNone(size_t i) const;
  /// Input i as an IR tensor; constants are materialized, numbers as 0-d
  /// tensors of `elementType` (required for numbers). With `elementType`,
  /// tensors of another element type are cast.
  mlir::Value tensor(size_t i, mlir::Type elementType = {});
  /// The current IR value of a tensor (see Importer::read).
  mlir::Value read(const Known &tensor);
  /// Like tensor(), but null for None.
  mlir::Value optionalTensor(size_t i, mlir::Type elementType = {});
  /// Input i as a compile-time value; reports an error if it is not one.
  std::optional<c10::IValue> constant(size_t i);
  std::optional<int64_t> intConstant(size_t i);
  std::optional<double> doubleConstant(size_t i);
  std::optional<std::vector<int64_t>> intListConstant(size_t i);
  /// The shadow of input i (tensors and tensor constants).
  at::Tensor shadowOf(size_t i) const;

  /// The IR type of output j, from its meta shadow.
  mlir::RankedTensorType outputType(size_t j = 0) const;
  mlir::Type outputElementType(size_t j = 0) const;
  const at::Tensor &outputShadow(size_t j = 0) const;
  /// Output j of an op producing a list of tensors.
  const std::vector<Known> &outputElements(size_t j = 0) const;

  void setOutput(size_t j, mlir::Value value);
  void setOutput(size_t j, Known known);
  /// Writes `value` into tensor input i in place (see Importer::write), as
  /// batch_norm writes its running statistics.
  mlir::LogicalResult writeInput(size_t i, mlir::Value value);
  /// Reports `message` at the node.
  void report(const llvm::Twine &message);
  mlir::LogicalResult error(const llvm::Twine &message) {
    report(message);
    return mlir::failure();
  }
  mlir::Value cast(mlir::Value value, mlir::Type elementType);
  /// A 0-d constant of `elementType` holding `number`.
  mlir::Value scalar(double number, mlir::Type elementType);
  /// An IR constant holding `value` (see Importer::materialize).
  mlir::Value materialize(const at::Tensor &value);
  /// See Importer::takeRandomStream.
  int64_t takeRandomStream();

  template <typename OpTy, typename... Args>
  mlir::Value create(mlir::Type resultType, Args &&...args) {
    return getBuilder()
        .create<OpTy>(loc, resultType, std::forward<Args>(args)...)
        .getResult();
  }

  /// Normalizes a possibly negative dim of a rank-`rank` tensor.
  std::optional<int64_t> dim(int64_t d, int64_t rank);

private:
  Importer &importer;
  jit::Node *node;
  Frame &frame;
  mlir::Location loc;
  std::vector<Known> outputShadows;
};

using LoweringFn = mlir::LogicalResult (*)(NodeLowering &);
/// Lowerings of tensor ops by schema name (`aten::linear`). An in-place op
/// without a lowering of its own (`aten::add_`) lowers as its functional
/// variant (`aten::add`), whose result is written into its input; those with
/// one (`aten::copy_`) set output 0 to the input's new value.
const llvm::StringMap<LoweringFn> &getLowerings();

/// Ops whose results read input 0 through view steps, one path per result
/// tensor (a list result has one per element), in order. The result is a
/// view when PyTorch makes it one (`reshape` and `contiguous` may copy) and is
/// cast to its dtype when it is a copy (`to`).
using ViewFn = mlir::LogicalResult (*)(NodeLowering &,
                                       std::vector<ViewPath> &paths);
const llvm::StringMap<ViewFn> &getViewLowerings();

/// The IR tensor type of a shadow, or null for an unrepresented dtype.
mlir::RankedTensorType getTensorType(mlir::MLIRContext *context,
                                     const at::Tensor &shadow);

class Importer {
public:
  Importer(mlir::MLIRContext &context, jit::Module root,
           llvm::StringRef modelPath);

  mlir::OwningOpRef<mlir::ModuleOp> run(llvm::ArrayRef<InputSpec> inputs);

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::MLIRContext &getContext() { return context; }
  /// The location of `node`: its Python source line inside the frame's
  /// module. Nodes the tracer adds (aten::Int, aten::ScalarImplicit) have no
  /// source; they get the line of the nearest node that has one.
  mlir::Location locationOf(jit::Node *node, const Frame &frame);
  /// `'aten::mul_' in module 'a.b'` (or `in the root module`), for messages.
  static std::string describe(jit::Node *node, const Frame &frame);
  /// An IR constant holding `value` (a tensor), splat when all elements are
  /// equal.
  mlir::Value materialize(const at::Tensor &value, mlir::Location loc);
  void error(mlir::Location loc, const llvm::Twine &message);
  /// The current IR value of tensor `known`, which `reader` (an op, for
  /// messages) reads: constants are materialized, and a view of a storage
  /// written at run time is read again from it. Reports an error and returns
  /// null for a view no steps describe.
  mlir::Value read(const Known &known, mlir::Location loc,
                   llvm::StringRef reader);
  /// Writes `value` into tensor `target` in place, as `node` does: the new
  /// value of its storage is the old one with `target`'s part replaced, so
  /// that every tensor sharing the storage reads the update. `uniform` says
  /// every element of `value` is the same (fill_, zero_): PyTorch lets such
  /// a write reach one memory element through several of its copies in an
  /// expanded view.
  /// A written buffer is model state the step updates: later reads of it
  /// read the written value, and the forward ends in its update.
  mlir::LogicalResult write(const Known &target, mlir::Value value,
                            bool uniform, jit::Node *node, const Frame &frame);
  /// The `stream` of the next dropout: the model's dropouts are numbered in
  /// program order, so the numbers stay the same whatever passes run later.
  int64_t takeRandomStream() { return nextRandomStream++; }

private:
  std::vector<Known> importGraph(jit::Graph &graph, std::vector<Known> args,
                                 llvm::StringRef modulePath,
                                 mlir::Location callSite);
  /// locationOf() without the module path.
  mlir::Location sourceLocationOf(jit::Node *node, const Frame &frame);
  /// describe() followed by the Python file and line, for messages about a
  /// node other than the one reported.
  std::string describeAt(jit::Node *node, const Frame &frame);
  void importBlock(jit::Block *block, Frame &frame);
  void importNode(jit::Node *node, Frame &frame);
  void importControlFlow(jit::Node *node, Frame &frame);
  void importGetAttr(jit::Node *node, Frame &frame);
  void importCall(jit::Node *node, Frame &frame);
  bool tryEvaluate(jit::Node *node, Frame &frame);
  void lowerTensorOp(jit::Node *node, Frame &frame);
  /// The value `before` has after a write of `updated` into its broadcast
  /// by `step`, whose elements `written` the write reaches; failure where
  /// the copies the write reaches do not make one value.
  mlir::FailureOr<mlir::Value>
  unbroadcast(const ViewStep &step, mlir::Value before, mlir::Value updated,
              const at::Tensor &written, bool uniform, mlir::Location loc);
  /// Lowers an op that reads input 0 through view steps (see ViewFn).
  void lowerView(jit::Node *node, Frame &frame, ViewFn describe,
                 OperatorRun run);
  /// Lowers an op that writes its input 0 in place; `functional` says the
  /// lowering is that of the op's functional variant.
  void lowerInPlace(jit::Node *node, Frame &frame, LoweringFn lowering,
                    bool functional, OperatorRun run);
  /// Output `result` of `node`, which was given `run.tensorInputs`: a view of
  /// the input it aliases, else `fresh`.
  Known adoptAlias(jit::Node *node, const Frame &frame, const OperatorRun &run,
                   const at::Tensor &result, Known fresh);
  /// The value of run-time tensor `tensor`, whose data `node` reads, when it
  /// is computed from sizes and constants alone (an arange of a size, and
  /// what follows from it): no input, parameter, buffer or random draw.
  std::optional<at::Tensor> valueFromSizes(const Known &tensor, jit::Node *node,
                                           const Frame &frame);
  /// Gives an unsupported node's outputs typed stand-in values.
  void placeholdOutputs(jit::Node *node, Frame &frame, mlir::Location loc);
  /// Runs `node` on meta shadows (or, for ops without meta kernels, on zeros
  /// of their shapes): result shapes and dtypes without computing, and
  /// without writing any compile-time value.
  /// `why` receives PyTorch's reason when the op fails on those shapes.
  std::optional<OperatorRun> computeShadows(jit::Node *node, Frame &frame,
                                            std::string *why = nullptr);
  Known paramAccess(const at::Tensor &value, const std::string &fullName,
                    mlir::Location loc);
  void declareParameters();
  /// The model file, inside the module that owns parameter `name`.
  mlir::Location paramLocation(llvm::StringRef name);

  mlir::MLIRContext &context;
  jit::Module root;
  std::string modelPath;
  mlir::OpBuilder builder;
  mlir::ModuleOp module;
  /// The forward's inputs, which notes on shape errors name.
  llvm::ArrayRef<InputSpec> inputs;
  /// The symbol of each parameter and buffer, by tensor identity (tied
  /// weights are one symbol).
  llvm::DenseMap<const c10::TensorImpl *, slapo::ParamOp> params;
  /// The buffers the forward writes, in the order first written: the
  /// storage that later reads share, and where (module and source) it was
  /// last written.
  struct BufferWrite {
    std::shared_ptr<TensorStorage> storage;
    std::string modulePath;
    mlir::Location loc;
  };
  std::vector<BufferWrite> bufferWrites;
  bool failed = false;
  std::set<std::string> reportedUnsupported;
  int64_t nextRandomStream = 0;
};

} // namespace slapo::torchscript

#endif // SLAPO_FRONTEND_TORCHSCRIPT_IMPORTER_H
