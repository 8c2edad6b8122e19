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
} // namespace slapo

namespace slapo::torchscript {

namespace jit = torch::jit;

/// What the importer knows about one TorchScript value.
struct Known {
  enum class Kind {
    Poison,    // produced after an error; uses report nothing further
    Tensor,    // a runtime tensor: `tensor` in the IR, `shadow` on meta
    Constant,  // a compile-time value (number, list, dtype, None, tensor...)
    Module,    // a submodule, with its dotted path
    Aggregate, // a list or tuple whose elements are known individually
  };
  Kind kind = Kind::Poison;
  mlir::Value tensor;
  at::Tensor shadow;
  c10::IValue constant;
  std::optional<jit::Module> module;
  std::string modulePath;
  std::vector<Known> elements;

  static Known poison() { return Known(); }
  static Known ofTensor(mlir::Value value, at::Tensor shadow);
  static Known ofConstant(c10::IValue value);
  static Known ofModule(jit::Module module, std::string path);
  static Known ofAggregate(std::vector<Known> elements);

  bool is(Kind k) const { return kind == k; }
  /// True for constants and aggregates made only of constants.
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
  /// Reports `message` at the node.
  void report(const llvm::Twine &message);
  mlir::LogicalResult error(const llvm::Twine &message) {
    report(message);
    return mlir::failure();
  }
  mlir::Value cast(mlir::Value value, mlir::Type elementType);
  /// A 0-d constant of `elementType` holding `number`.
  mlir::Value scalar(double number, mlir::Type elementType);
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
/// Lowerings of tensor ops by schema name (`aten::linear`), in-place variants
/// excluded: `aten::add_` lowers as `aten::add` and rebinds its input.
const llvm::StringMap<LoweringFn> &getLowerings();

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
  /// The `stream` of the next dropout: the model's dropouts are numbered in
  /// program order, so the numbers stay the same whatever passes run later.
  int64_t takeRandomStream() { return nextRandomStream++; }

private:
  std::vector<Known> importGraph(jit::Graph &graph, std::vector<Known> args,
                                 llvm::StringRef modulePath,
                                 mlir::Location callSite);
  /// locationOf() without the module path.
  mlir::Location sourceLocationOf(jit::Node *node, const Frame &frame);
  void importBlock(jit::Block *block, Frame &frame);
  void importNode(jit::Node *node, Frame &frame);
  void importControlFlow(jit::Node *node, Frame &frame);
  void importGetAttr(jit::Node *node, Frame &frame);
  void importCall(jit::Node *node, Frame &frame);
  bool tryEvaluate(jit::Node *node, Frame &frame);
  void lowerTensorOp(jit::Node *node, Frame &frame);
  /// Gives an unsupported node's outputs typed stand-in values.
  void placeholdOutputs(jit::Node *node, Frame &frame, mlir::Location loc);
  std::optional<std::vector<Known>> computeShadows(jit::Node *node,
                                                   Frame &frame);
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
  /// The symbol of each parameter and buffer, by tensor identity (tied
  /// weights are one symbol).
  llvm::DenseMap<const c10::TensorImpl *, slapo::ParamOp> params;
  bool failed = false;
  std::set<std::string> reportedUnsupported;
  int64_t nextRandomStream = 0;
};

} // namespace slapo::torchscript

#endif // SLAPO_FRONTEND_TORCHSCRIPT_IMPORTER_H
