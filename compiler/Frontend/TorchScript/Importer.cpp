//===- Importer.cpp - walks TorchScript graphs into slapo IR --------------===//
#include "Importer.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/TensorBuilder.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Frontend/TrainingLoss.h"
#include "slapo/Reference/Interpreter.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

#include <ATen/ATen.h>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>

namespace slapo {

TorchScriptModel::TorchScriptModel(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
TorchScriptModel::~TorchScriptModel() = default;

const std::string &TorchScriptModel::getPath() const { return impl->path; }

llvm::Expected<std::unique_ptr<TorchScriptModel>>
TorchScriptModel::load(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot load TorchScript model '" + path +
                                       "': " + why);
  };
  if (!llvm::sys::fs::exists(path))
    return fail("no such file");
  auto impl = std::make_unique<Impl>();
  impl->path = path.str();
  try {
    impl->module = torch::jit::load(impl->path);
  } catch (const std::exception &e) {
    // LibTorch messages carry a C++ stack trace after the first line.
    llvm::StringRef message(e.what());
    return fail("not a valid TorchScript archive (" +
                message.split('\n').first.trim() + ")");
  }
  if (llvm::Error e = checkTensorRecords(impl->path, impl->module))
    return std::move(e);
  if (!impl->module.find_method("forward"))
    return fail("the module has no forward method");
  return std::unique_ptr<TorchScriptModel>(
      new TorchScriptModel(std::move(impl)));
}

std::string TorchScriptModel::printInlinedForward() const {
  std::shared_ptr<torch::jit::Graph> graph =
      impl->module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  return graph->toString();
}

mlir::OwningOpRef<mlir::ModuleOp>
importTorchScript(mlir::MLIRContext &context, TorchScriptModel &model,
                  llvm::ArrayRef<InputSpec> inputs) {
  context.loadDialect<SlapoDialect, mlir::func::FuncDialect>();
  try {
    torchscript::Importer importer(context, model.getImpl().module,
                                   model.getPath());
    return importer.run(inputs);
  } catch (const std::exception &e) {
    mlir::emitError(mlir::FileLineColLoc::get(&context, model.getPath(), 0, 0))
        << "internal error while importing: "
        << llvm::StringRef(e.what()).split('\n').first;
    return nullptr;
  }
}

namespace torchscript {

//===----------------------------------------------------------------------===//
// Known values.
//===----------------------------------------------------------------------===//

/// A meta tensor with the sizes, strides and dtype of `tensor`.
static at::Tensor metaLike(const at::Tensor &tensor) {
  return at::empty_strided(
      tensor.sizes(), tensor.strides(),
      at::TensorOptions().dtype(tensor.scalar_type()).device(at::kMeta));
}

Known Known::ofTensor(mlir::Value value, at::Tensor shadow) {
  Known known;
  known.kind = Kind::Tensor;
  known.storage = std::make_shared<TensorStorage>();
  known.storage->value = value;
  known.lastRead = value;
  known.shadow = std::move(shadow);
  return known;
}

static bool holdsTensors(const c10::IValue &value) {
  if (value.isTensor())
    return true;
  if (value.isTuple())
    return llvm::any_of(value.toTupleRef().elements(), holdsTensors);
  if (value.isList())
    return llvm::any_of(value.toListRef(), holdsTensors);
  return false;
}

Known Known::ofConstant(c10::IValue value) {
  Known known;
  if (value.isTensor()) {
    known.kind = Kind::Tensor;
    known.storage = std::make_shared<TensorStorage>();
    known.storage->constant = value.toTensor();
    known.shadow = metaLike(value.toTensor());
  } else if (holdsTensors(value)) {
    // Each tensor gets its own storage: a list or tuple holding tensors is
    // an aggregate, so that its tensors can be written like any other.
    std::vector<Known> elements;
    for (const c10::IValue &element : value.isTuple()
                                          ? value.toTupleRef().elements().vec()
                                          : value.toListRef().vec())
      elements.push_back(ofConstant(element));
    return ofAggregate(std::move(elements));
  } else {
    known.kind = Kind::Constant;
  }
  known.constant = std::move(value);
  return known;
}

Known Known::ofModule(jit::Module module, std::string path) {
  Known known;
  known.kind = Kind::Module;
  known.module = std::move(module);
  known.modulePath = std::move(path);
  return known;
}

Known Known::ofAggregate(std::vector<Known> elements) {
  Known known;
  known.kind = Kind::Aggregate;
  known.elements = std::make_shared<std::vector<Known>>(std::move(elements));
  return known;
}

bool Known::isConstant() const {
  if (kind == Kind::Constant)
    return true;
  if (kind == Kind::Tensor)
    return storage && storage->constant.defined();
  return kind == Kind::Aggregate &&
         llvm::all_of(*elements, [](const Known &e) { return e.isConstant(); });
}

/// The IValue an operator sees for `known` of TorchScript type `type`: lists
/// and tuples are typed as the operator schemas expect, and tensors are
/// replaced by `tensorFor(known)` (their value, their shadow, or data of
/// their shape).
static c10::IValue
toIValue(const Known &known, const c10::TypePtr &type,
         llvm::function_ref<at::Tensor(const Known &)> tensorFor) {
  if (known.is(Known::Kind::Constant))
    return known.constant;
  if (known.is(Known::Kind::Tensor))
    return tensorFor(known);
  if (auto tupleType = type->cast<c10::TupleType>()) {
    std::vector<c10::IValue> elements;
    for (auto [i, element] : llvm::enumerate(*known.elements))
      elements.push_back(
          toIValue(element, tupleType->elements().at(i), tensorFor));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  c10::TypePtr elementType = known.isConstant()
                                 ? c10::AnyType::get()
                                 : c10::TypePtr(c10::TensorType::get());
  if (auto listType = type->cast<c10::ListType>())
    elementType = listType->getElementType();
  c10::impl::GenericList list(elementType);
  for (const Known &element : *known.elements)
    list.push_back(toIValue(element, elementType, tensorFor));
  return list;
}

/// A tensor's compile-time value if it has one, else its shadow.
static at::Tensor valueOrShadow(const Known &tensor) {
  return tensor.isConstant() ? tensor.constant.toTensor() : tensor.shadow;
}

//===----------------------------------------------------------------------===//
// Types.
//===----------------------------------------------------------------------===//

mlir::RankedTensorType getTensorType(mlir::MLIRContext *context,
                                     const at::Tensor &shadow) {
  mlir::Type elementType =
      reference::toElementType(shadow.scalar_type(), context);
  if (!elementType)
    return nullptr;
  return mlir::RankedTensorType::get(shadow.sizes().vec(), elementType);
}

static bool isTensorType(const c10::TypePtr &type) {
  if (type->kind() == c10::TypeKind::TensorType)
    return true;
  if (auto list = type->cast<c10::ListType>())
    return isTensorType(list->getElementType());
  if (auto optional = type->cast<c10::OptionalType>())
    return isTensorType(optional->getElementType());
  return false;
}

//===----------------------------------------------------------------------===//
// The importer.
//===----------------------------------------------------------------------===//

static std::string absolute(llvm::StringRef path) {
  llvm::SmallString<256> result(path);
  llvm::sys::fs::make_absolute(result);
  return result.str().str();
}

Importer::Importer(mlir::MLIRContext &context, jit::Module root,
                   llvm::StringRef modelPath)
    : context(context), root(std::move(root)), modelPath(absolute(modelPath)),
      builder(&context) {}

void Importer::error(mlir::Location loc, const llvm::Twine &message) {
  failed = true;
  mlir::emitError(loc) << message;
}

/// The Python file, line and column that `node` comes from, if it has them.
static c10::optional<std::tuple<std::string, size_t, size_t>>
ownSource(jit::Node *node) {
  jit::SourceRange range = node->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated())
    range = *original;
  auto fileLineCol = range.file_line_col();
  // Nodes the tracer adds carry an empty original ("", line 0).
  if (fileLineCol && std::get<0>(*fileLineCol).empty())
    return c10::nullopt;
  return fileLineCol;
}

/// The source of `node`, or of the nearest node that has one: a user of its
/// results first (the Python expression that needed the value), then an
/// earlier node of its block, then the node that owns the block.
static c10::optional<std::tuple<std::string, size_t, size_t>>
nearestSource(jit::Node *node) {
  if (auto source = ownSource(node))
    return source;
  // Tracer-added nodes feed one another (NumToTensor -> Int -> ListConstruct
  // -> op): a few levels of users reach the op.
  constexpr size_t kMaxUsersVisited = 32;
  std::vector<jit::Node *> users{node};
  for (size_t next = 0; next < users.size() && users.size() < kMaxUsersVisited;
       ++next)
    for (const jit::Value *output : users[next]->outputs())
      for (const jit::Use &use : output->uses()) {
        if (auto source = ownSource(use.user))
          return source;
        users.push_back(use.user);
      }
  for (jit::Node *earlier = node->prev(); earlier->kind() != c10::prim::Param;
       earlier = earlier->prev())
    if (auto source = ownSource(earlier))
      return source;
  if (jit::Node *owner = node->owningBlock()->owningNode())
    return nearestSource(owner);
  return c10::nullopt;
}

mlir::Location Importer::sourceLocationOf(jit::Node *node, const Frame &frame) {
  if (auto fileLineCol = nearestSource(node))
    return mlir::FileLineColLoc::get(&context, std::get<0>(*fileLineCol),
                                     std::get<1>(*fileLineCol),
                                     std::get<2>(*fileLineCol) + 1);
  return frame.callSite;
}

/// `sourceLoc` named after the module, so that messages show the module
/// beside the Python line. Nothing reads a path back from a location: the
/// ops' slapo.module attribute holds it (ModulePath.h).
static mlir::Location namedAfterModule(llvm::StringRef modulePath,
                                       mlir::Location sourceLoc) {
  if (modulePath.empty())
    return sourceLoc;
  return mlir::NameLoc::get(
      mlir::StringAttr::get(sourceLoc.getContext(), modulePath), sourceLoc);
}

mlir::Location Importer::locationOf(jit::Node *node, const Frame &frame) {
  return namedAfterModule(frame.modulePath, sourceLocationOf(node, frame));
}

std::string Importer::describe(jit::Node *node, const Frame &frame) {
  std::string op = "'" + std::string(node->kind().toQualString()) + "'";
  if (frame.modulePath.empty())
    return op + " in the root module";
  return op + " in module '" + frame.modulePath + "'";
}

std::string Importer::describeAt(jit::Node *node, const Frame &frame) {
  auto source = sourceLocationOf(node, frame).dyn_cast<mlir::FileLineColLoc>();
  if (!source)
    return describe(node, frame);
  return describe(node, frame) + " (" + source.getFilename().str() + ":" +
         std::to_string(source.getLine()) + ")";
}

mlir::Location Importer::paramLocation(llvm::StringRef name) {
  // PyTorch forbids '.' inside attribute names: the owner is the prefix.
  auto [owner, leaf] = name.rsplit('.');
  return namedAfterModule(leaf.empty() ? "" : owner,
                          mlir::FileLineColLoc::get(&context, modelPath, 0, 0));
}

void Importer::declareParameters() {
  auto declare = [&](const std::string &name, const at::Tensor &value,
                     bool isBuffer) {
    auto [it, inserted] =
        params.try_emplace(value.unsafeGetTensorImpl(), nullptr);
    if (!inserted) {
      // A tied parameter: one symbol, its other names kept for state_dict.
      llvm::SmallVector<mlir::Attribute> aliases;
      if (auto existing = it->second.getAliasesAttr())
        aliases.append(existing.begin(), existing.end());
      aliases.push_back(builder.getStringAttr(name));
      it->second.setAliasesAttr(builder.getArrayAttr(aliases));
      return;
    }
    mlir::RankedTensorType type = getTensorType(&context, value);
    if (!type) {
      error(paramLocation(name),
            "parameter '" + name + "' has unsupported dtype " +
                std::string(c10::toString(value.scalar_type())));
      return;
    }
    it->second = builder.create<ParamOp>(paramLocation(name), name, type,
                                         isBuffer, /*aliases=*/nullptr,
                                         /*shard_axis=*/nullptr,
                                         /*shard_chunks=*/nullptr);
  };
  for (const auto &param : root.named_parameters(/*recurse=*/true))
    declare(param.name, param.value, /*isBuffer=*/false);
  for (const auto &buffer : root.named_buffers(/*recurse=*/true))
    declare(buffer.name, buffer.value, /*isBuffer=*/true);
}

mlir::OwningOpRef<mlir::ModuleOp>
Importer::run(llvm::ArrayRef<InputSpec> inputs) {
  this->inputs = inputs;
  mlir::Location fileLoc = mlir::FileLineColLoc::get(&context, modelPath, 0, 0);
  mlir::OwningOpRef<mlir::ModuleOp> owned = mlir::ModuleOp::create(fileLoc);
  module = *owned;
  module->setAttr(kWeightsAttrName, builder.getStringAttr(modelPath));
  builder.setInsertionPointToEnd(module.getBody());
  declareParameters();

  jit::Method forward = root.get_method("forward");
  const c10::FunctionSchema &schema = forward.function().getSchema();
  // The schema's first argument is `self`.
  llvm::ArrayRef<c10::Argument> arguments = schema.arguments();
  arguments = arguments.drop_front();
  size_t required = llvm::count_if(arguments, [](const c10::Argument &a) {
    return !a.default_value().has_value();
  });
  auto argumentList = [&] {
    return llvm::join(
        llvm::map_range(arguments,
                        [](const c10::Argument &a) { return a.name(); }),
        ", ");
  };
  if (inputs.size() < required || inputs.size() > arguments.size()) {
    error(fileLoc,
          "forward(" + argumentList() + ") takes " +
              (required == arguments.size()
                   ? std::to_string(required)
                   : std::to_string(required) + " to " +
                         std::to_string(arguments.size())) +
              " inputs, but " + std::to_string(inputs.size()) +
              " were given; declare each with --input NAME=DTYPE[SHAPE]"
              " in forward-argument order");
    return nullptr;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name != arguments[i].name()) {
      error(fileLoc, "input " + std::to_string(i + 1) + " is named '" +
                         inputs[i].name + "', but forward(" + argumentList() +
                         ") calls it '" + arguments[i].name() +
                         "'; inputs are given in forward-argument order");
      return nullptr;
    }

  llvm::SmallVector<mlir::Type> argTypes;
  for (const InputSpec &input : inputs)
    argTypes.push_back(input.getType(context));
  auto func = builder.create<mlir::func::FuncOp>(
      fileLoc, "forward", builder.getFunctionType(argTypes, {}));
  mlir::Block *entry = func.addEntryBlock();
  for (size_t i = 0; i < inputs.size(); ++i)
    func.setArgAttr(i, "slapo.name", builder.getStringAttr(inputs[i].name));
  builder.setInsertionPointToStart(entry);

  std::vector<Known> args{Known::ofModule(root, "")};
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor shadow = at::empty(
        inputs[i].shape,
        at::TensorOptions()
            .dtype(*reference::toScalarType(
                argTypes[i].cast<mlir::RankedTensorType>().getElementType()))
            .device(at::kMeta));
    args.push_back(Known::ofTensor(entry->getArgument(i), shadow));
  }
  // Copies: compile-time writes must not reach the schema's defaults.
  for (size_t i = inputs.size(); i < arguments.size(); ++i)
    args.push_back(Known::ofConstant(arguments[i].default_value()->deepcopy()));

  std::vector<Known> outputs = importGraph(*forward.graph(), args, "", fileLoc);

  // Tuples returned by forward become the function's results, in order. The
  // IR reads each where the value returned was made (TorchScript keeps no
  // source for the return statement).
  jit::Graph &graph = *forward.graph();
  Frame root("", fileLoc);
  llvm::SmallVector<mlir::Value> results;
  std::function<void(const Known &, jit::Value *)> addResult =
      [&](const Known &known, jit::Value *value) {
        jit::Node *producer = value->node();
        bool tuple = producer->kind() == c10::prim::TupleConstruct;
        if (known.is(Known::Kind::Aggregate)) {
          for (auto [i, element] : llvm::enumerate(*known.elements))
            addResult(element, tuple ? producer->input(i) : value);
        } else if (known.is(Known::Kind::Tensor)) {
          if (mlir::Value result =
                  read(known, locationOf(producer, root), "forward's return"))
            results.push_back(result);
        } else if (!known.is(Known::Kind::Poison)) {
          error(fileLoc,
                "forward returns a " + known.constant.tagKind() +
                    "; only tensors (or tuples of tensors) can be outputs");
        }
      };
  for (auto [output, value] : llvm::zip(outputs, graph.outputs()))
    addResult(output, value);
  if (failed)
    return nullptr;
  // The model state the forward wrote, updated once the step is done.
  for (const BufferWrite &write : bufferWrites) {
    ModulePathScope inModule(builder, write.modulePath);
    builder.create<UpdateBufferOp>(
        write.loc, write.storage->buffer.getSymName(), write.storage->value);
  }
  builder.create<mlir::func::ReturnOp>(fileLoc, results);
  func.setType(
      builder.getFunctionType(argTypes, mlir::ValueRange(results).getTypes()));
  if (mlir::failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

std::vector<Known> Importer::importGraph(jit::Graph &graph,
                                         std::vector<Known> args,
                                         llvm::StringRef modulePath,
                                         mlir::Location callSite) {
  Frame frame(modulePath.str(), callSite);
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    frame.values[graph.inputs()[i]] =
        i < args.size() ? std::move(args[i]) : Known::poison();
  ModulePathScope inModule(builder, modulePath);
  importBlock(graph.block(), frame);
  std::vector<Known> outputs;
  for (const jit::Value *output : graph.outputs())
    outputs.push_back(frame.values.lookup(output));
  return outputs;
}

void Importer::importBlock(jit::Block *block, Frame &frame) {
  for (jit::Node *node : block->nodes())
    importNode(node, frame);
}

void Importer::importNode(jit::Node *node, Frame &frame) {
  // A node fed by an earlier error produces nothing and reports nothing.
  for (const jit::Value *input : node->inputs())
    if (frame.values.lookup(input).is(Known::Kind::Poison))
      return frame.poisonOutputs(node);

  switch (node->kind()) {
  case c10::prim::Constant: {
    c10::TypePtr type = node->output()->type();
    if (type->kind() == c10::TypeKind::FunctionType)
      frame.values[node->output()] = Known::ofConstant(c10::IValue());
    else // A copy: compile-time writes must not reach the graph's constant.
      frame.values[node->output()] =
          Known::ofConstant(jit::toIValue(node->output())->deepcopy());
    return;
  }
  case c10::prim::GetAttr:
    return importGetAttr(node, frame);
  case c10::prim::CallMethod:
  case c10::prim::CallFunction:
    return importCall(node, frame);
  case c10::prim::If:
  case c10::prim::Loop:
    return importControlFlow(node, frame);
  case c10::prim::ListConstruct:
  case c10::prim::TupleConstruct: {
    std::vector<Known> elements;
    for (const jit::Value *input : node->inputs())
      elements.push_back(frame.values.lookup(input));
    frame.values[node->output()] = Known::ofAggregate(std::move(elements));
    return;
  }
  case c10::prim::ListUnpack:
  case c10::prim::TupleUnpack: {
    Known aggregate = frame.values.lookup(node->input());
    if (aggregate.is(Known::Kind::Constant)) {
      // A constant list: unpack its IValues.
      std::vector<c10::IValue> items =
          aggregate.constant.isTuple()
              ? aggregate.constant.toTupleRef().elements().vec()
              : aggregate.constant.toListRef().vec();
      for (size_t i = 0; i < node->outputs().size(); ++i)
        frame.values[node->outputs()[i]] = Known::ofConstant(items.at(i));
      return;
    }
    for (size_t i = 0; i < node->outputs().size(); ++i)
      frame.values[node->outputs()[i]] = aggregate.elements->at(i);
    return;
  }
  case c10::prim::TupleIndex:
  case c10::aten::__getitem__: {
    Known aggregate = frame.values.lookup(node->input(0));
    Known index = frame.values.lookup(node->input(1));
    if (aggregate.is(Known::Kind::Aggregate) && index.isConstant() &&
        index.constant.isInt()) {
      int64_t i = index.constant.toInt();
      int64_t size = aggregate.elements->size();
      if (i < 0)
        i += size;
      if (i >= 0 && i < size) {
        frame.values[node->output()] = (*aggregate.elements)[i];
        return;
      }
    }
    break;
  }
  case c10::aten::append: {
    Known list = frame.values.lookup(node->input(0));
    if (list.is(Known::Kind::Aggregate)) {
      list.elements->push_back(frame.values.lookup(node->input(1)));
      frame.values[node->output()] = list;
      return;
    }
    break;
  }
  case c10::prim::device:
    // Everything the importer sees lives on the CPU: the compiler, not the
    // model, decides where tensors go.
    frame.values[node->output()] = Known::ofConstant(c10::Device(c10::kCPU));
    return;
  case c10::prim::RaiseException:
    error(locationOf(node, frame),
          "the model raises an exception for these inputs");
    return;
  case c10::prim::Uninitialized:
    frame.values[node->output()] = Known::ofConstant(c10::IValue());
    return;
  case c10::prim::unchecked_cast:
    frame.values[node->output()] = frame.values.lookup(node->input());
    return;
  case c10::aten::warn:
  case c10::prim::Print:
    return;
  default:
    break;
  }
  if (tryEvaluate(node, frame))
    return;
  lowerTensorOp(node, frame);
}

void Importer::importGetAttr(jit::Node *node, Frame &frame) {
  Known owner = frame.values.lookup(node->input());
  std::string name = node->s(c10::attr::name);
  mlir::Location loc = locationOf(node, frame);
  if (!owner.is(Known::Kind::Module)) {
    error(loc, "attribute '" + name + "' of a value that is not a module");
    frame.values[node->output()] = Known::poison();
    return;
  }
  std::string path =
      owner.modulePath.empty() ? name : owner.modulePath + "." + name;
  c10::IValue value = owner.module->attr(name);
  if (value.isModule())
    frame.values[node->output()] = Known::ofModule(value.toModule(), path);
  else if (value.isTensor())
    frame.values[node->output()] = paramAccess(value.toTensor(), path, loc);
  else // A copy: compile-time writes must not reach the module.
    frame.values[node->output()] = Known::ofConstant(value.deepcopy());
}

Known Importer::paramAccess(const at::Tensor &value,
                            const std::string &fullName, mlir::Location loc) {
  auto it = params.find(value.unsafeGetTensorImpl());
  if (it == params.end() || !it->second) {
    // A tensor attribute that is neither parameter nor buffer: model state
    // all the same, so it is declared as a buffer under its path.
    mlir::RankedTensorType type = getTensorType(&context, value);
    if (!type) {
      error(loc, "tensor attribute '" + fullName + "' has unsupported dtype " +
                     std::string(c10::toString(value.scalar_type())));
      return Known::poison();
    }
    // Declared beside the others, out of the module path scope of the
    // access: a parameter's name is its path.
    mlir::OpBuilder declarations(module.getBody(),
                                 std::prev(module.getBody()->end()));
    it = params
             .try_emplace(value.unsafeGetTensorImpl(),
                          declarations.create<ParamOp>(
                              paramLocation(fullName), fullName, type,
                              /*buffer=*/true, /*aliases=*/nullptr,
                              /*shard_axis=*/nullptr, /*shard_chunks=*/nullptr))
             .first;
  }
  ParamOp param = it->second;
  // A buffer written already is read as written, like the memory it is.
  auto written = llvm::find_if(bufferWrites, [&](const BufferWrite &w) {
    return w.storage->buffer == param;
  });
  if (written != bufferWrites.end()) {
    Known known = Known::ofTensor(written->storage->value, metaLike(value));
    known.storage = written->storage;
    return known;
  }
  auto get = builder.create<GetParamOp>(loc, param.getTensorType(),
                                        param.getSymName());
  Known known = Known::ofTensor(get.getResult(), metaLike(value));
  known.storage->parameter = fullName;
  if (param.getBuffer())
    known.storage->buffer = param;
  return known;
}

void Importer::importCall(jit::Node *node, Frame &frame) {
  std::vector<Known> args;
  for (const jit::Value *input : node->inputs())
    args.push_back(frame.values.lookup(input));
  std::shared_ptr<jit::Graph> graph;
  std::string path = frame.modulePath;
  if (node->kind() == c10::prim::CallMethod) {
    const Known &self = args.front();
    if (!self.is(Known::Kind::Module)) {
      error(locationOf(node, frame),
            "method '" + node->s(c10::attr::name) +
                "' called on a value that is not a module");
      return frame.poisonOutputs(node);
    }
    graph = self.module->get_method(node->s(c10::attr::name)).graph();
    path = self.modulePath;
  } else {
    // The callee is the function constant in input 0, not an argument.
    auto function =
        node->input(0)->type()->expect<c10::FunctionType>()->function();
    graph = jit::toGraphFunction(*function).graph();
    args.erase(args.begin());
  }
  std::vector<Known> outputs =
      importGraph(*graph, std::move(args), path, sourceLocationOf(node, frame));
  for (size_t i = 0; i < node->outputs().size(); ++i)
    frame.values[node->outputs()[i]] = outputs.at(i);
}

void Importer::importControlFlow(jit::Node *node, Frame &frame) {
  mlir::Location loc = locationOf(node, frame);
  auto constantBool = [&](const jit::Value *value) -> std::optional<bool> {
    Known known = frame.values.lookup(value);
    if (known.is(Known::Kind::Constant) && known.constant.isBool())
      return known.constant.toBool();
    return std::nullopt;
  };

  if (node->kind() == c10::prim::If) {
    std::optional<bool> condition = constantBool(node->input());
    if (!condition) {
      error(loc, "control flow depends on tensor data; slapoc needs every "
                 "branch decided at compile time (static shapes, constant "
                 "flags)");
      return frame.poisonOutputs(node);
    }
    jit::Block *taken = node->blocks()[*condition ? 0 : 1];
    importBlock(taken, frame);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      frame.values[node->outputs()[i]] =
          frame.values.lookup(taken->outputs()[i]);
    return;
  }

  // prim::Loop(max_trip_count, initial_condition, carried...) with a body
  // block(iteration, carried...) -> (condition, carried...): unrolled.
  Known tripCount = frame.values.lookup(node->input(0));
  std::optional<bool> condition = constantBool(node->input(1));
  if (!tripCount.is(Known::Kind::Constant) || !tripCount.constant.isInt() ||
      !condition) {
    error(loc, "loop whose trip count or condition depends on tensor data");
    return frame.poisonOutputs(node);
  }
  jit::Block *body = node->blocks()[0];
  std::vector<Known> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(frame.values.lookup(node->inputs()[i]));
  for (int64_t iteration = 0;
       iteration < tripCount.constant.toInt() && *condition; ++iteration) {
    frame.values[body->inputs()[0]] = Known::ofConstant(iteration);
    for (size_t i = 0; i < carried.size(); ++i)
      frame.values[body->inputs()[i + 1]] = carried[i];
    importBlock(body, frame);
    condition = constantBool(body->outputs()[0]);
    if (!condition) {
      error(loc, "loop condition depends on tensor data");
      return frame.poisonOutputs(node);
    }
    for (size_t i = 0; i < carried.size(); ++i)
      carried[i] = frame.values.lookup(body->outputs()[i + 1]);
  }
  for (size_t i = 0; i < node->outputs().size(); ++i)
    frame.values[node->outputs()[i]] = carried.at(i);
}

/// Ops whose result is random or depends on more than their inputs: never
/// evaluated at compile time.
static bool isNondeterministic(jit::Node *node) {
  static const llvm::StringSet<> kinds{
      "aten::dropout",       "aten::dropout_",  "aten::feature_dropout",
      "aten::alpha_dropout", "aten::bernoulli", "aten::rand",
      "aten::randn",         "aten::randint",   "aten::rand_like",
      "aten::randn_like",    "aten::randperm",  "aten::normal",
      "aten::uniform_",      "aten::normal_",   "aten::empty",
      "aten::empty_like",    "aten::arange"};
  return kinds.contains(node->kind().toQualString());
}

/// Whether an in-place op left the sizes and strides of the tensor it wrote
/// as they were. The importer does not model writes that change them
/// (unsqueeze_, t_, resize_): every view of the tensor would change shape.
static bool sameLayout(const at::Tensor &before, const at::Tensor &after) {
  return before.sizes() == after.sizes() && before.strides() == after.strides();
}
static constexpr llvm::StringLiteral kChangesShape =
    "changes the shape of a tensor in place; slapoc does not model that (use "
    "the out-of-place op)";

/// The argument `node` writes in place, if any (`self` of aten::add_, the
/// list of aten::append, `out` of an out= variant), from the alias
/// annotations of its schema.
static std::optional<size_t> writtenArgument(jit::Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema)
    return std::nullopt;
  for (auto [i, argument] : llvm::enumerate(schema->arguments()))
    if (argument.alias_info() && argument.alias_info()->isWrite())
      return i;
  return std::nullopt;
}

/// The operator stack of `node`'s inputs, tensors given by `tensorFor`;
/// `run` records which tensor stands for which known value.
static std::vector<c10::IValue>
inputStack(jit::Node *node, const Frame &frame, OperatorRun &run,
           llvm::function_ref<at::Tensor(const Known &)> tensorFor) {
  auto record = [&](const Known &known) {
    at::Tensor tensor = tensorFor(known);
    run.tensorInputs.emplace_back(known, tensor);
    return tensor;
  };
  std::vector<c10::IValue> stack;
  for (const jit::Value *input : node->inputs())
    stack.push_back(
        toIValue(frame.values.lookup(input), input->type(), record));
  return stack;
}

/// Evaluates at compile time what does not depend on tensor data: nodes with
/// only constant inputs, nodes that read only shapes and dtypes (their
/// tensor inputs replaced by meta shadows), and nodes that read the data of
/// run-time tensors computed from sizes and constants alone (valueFromSizes).
/// Returns false for tensor ops.
bool Importer::tryEvaluate(jit::Node *node, Frame &frame) {
  if (!node->maybeOperator() || isNondeterministic(node))
    return false;
  bool producesTensor = llvm::any_of(node->outputs(), [](const jit::Value *v) {
    return isTensorType(v->type());
  });
  // Views, constant or not, are lowerView's: it knows what they alias.
  if (producesTensor && getViewLowerings().count(node->kind().toQualString()))
    return false;
  bool allConstant = true;
  for (const jit::Value *input : node->inputs())
    allConstant &= frame.values.lookup(input).isConstant();
  std::optional<size_t> written = writtenArgument(node);
  if (!allConstant && (producesTensor || written))
    return false;
  for (const jit::Value *input : node->inputs()) {
    const Known &known = frame.values.lookup(input);
    // Modules and aggregates of runtime tensors are not evaluated here.
    if (!known.is(Known::Kind::Tensor) && !known.isConstant())
      return false;
  }

  OperatorRun run;
  std::vector<c10::IValue> stack = inputStack(node, frame, run, valueOrShadow);
  const Known writtenInput =
      frame.values.lookup(node->input(written ? *written : 0));
  std::optional<at::Tensor> writtenShadowBefore;
  if (written && writtenInput.is(Known::Kind::Tensor))
    writtenShadowBefore = metaLike(writtenInput.constant.toTensor());
  // The op writes the list it is given (aten::_set_item); the aggregate it
  // stands for gets its new elements.
  c10::IValue writtenList;
  if (written && writtenInput.is(Known::Kind::Aggregate))
    writtenList = stack.at(*written);
  auto runOperation = [&](std::vector<c10::IValue> &operands,
                          std::string *why) {
    try {
      node->getOperation()(operands);
      return true;
    } catch (const std::exception &e) {
      if (why)
        *why = llvm::StringRef(e.what()).split('\n').first.str();
      return false;
    }
  };
  std::string why;
  if (!runOperation(stack, &why)) {
    if (allConstant) {
      error(locationOf(node, frame), "evaluating " + describe(node, frame) +
                                         " at compile time failed: " + why);
      frame.poisonOutputs(node);
      return true;
    }
    // The op reads the data of run-time tensors (shadows have none): those
    // computed from sizes and constants alone have values all the same.
    bool computable = true;
    OperatorRun computedRun;
    std::vector<c10::IValue> computed =
        inputStack(node, frame, computedRun, [&](const Known &tensor) {
          std::optional<at::Tensor> value =
              tensor.isConstant() ? tensor.constant.toTensor()
                                  : valueFromSizes(tensor, node, frame);
          computable &= value.has_value();
          return value ? *value : tensor.shadow;
        });
    if (!computable || !runOperation(computed, nullptr)) {
      error(locationOf(node, frame),
            describe(node, frame) +
                " depends on tensor data, so its result cannot be made "
                "static");
      frame.poisonOutputs(node);
      return true;
    }
    stack = std::move(computed);
    run = std::move(computedRun);
  }
  if (writtenShadowBefore &&
      !sameLayout(*writtenShadowBefore, writtenInput.constant.toTensor())) {
    error(locationOf(node, frame),
          describe(node, frame) + " " + kChangesShape.str());
    frame.poisonOutputs(node);
    return true;
  }
  std::function<Known(const c10::IValue &)> adopt =
      [&](const c10::IValue &value) {
        if (value.isTensor())
          return adoptAlias(node, frame, run, value.toTensor(),
                            Known::ofConstant(value));
        if (!holdsTensors(value))
          return Known::ofConstant(value);
        std::vector<Known> elements;
        for (const c10::IValue &element :
             value.isTuple() ? value.toTupleRef().elements().vec()
                             : value.toListRef().vec())
          elements.push_back(adopt(element));
        return Known::ofAggregate(std::move(elements));
      };
  if (writtenList.isList()) {
    std::vector<Known> elements;
    for (const c10::IValue &element : writtenList.toListRef())
      elements.push_back(adopt(element));
    *writtenInput.elements = std::move(elements);
  }
  for (size_t i = 0; i < node->outputs().size(); ++i)
    frame.values[node->outputs()[i]] =
        writtenList.isList() && stack.at(i).isSameIdentity(writtenList)
            ? writtenInput
            : adopt(stack.at(i));
  return true;
}

std::optional<at::Tensor> Importer::valueFromSizes(const Known &tensor,
                                                   jit::Node *node,
                                                   const Frame &frame) {
  mlir::Value value =
      read(tensor, locationOf(node, frame), describe(node, frame));
  mlir::Operation *result = value ? value.getDefiningOp() : nullptr;
  if (!result)
    return std::nullopt;
  llvm::SetVector<mlir::Operation *> slice;
  mlir::getBackwardSlice(result, &slice);
  slice.insert(result);
  for (mlir::Operation *op : slice) {
    if (llvm::isa<GetParamOp, DropoutOp>(op) ||
        !reference::hasEvaluator(op->getName().getStringRef()) ||
        llvm::any_of(op->getOperands(), [](mlir::Value operand) {
          return operand.isa<mlir::BlockArgument>();
        }))
      return std::nullopt;
  }
  // The ops that compute it, in a function of their own, evaluated as
  // --check-import evaluates the forward.
  mlir::Location loc = result->getLoc();
  mlir::OwningOpRef<mlir::ModuleOp> computation = mlir::ModuleOp::create(loc);
  mlir::OpBuilder b(computation->getBodyRegion());
  auto function = b.create<mlir::func::FuncOp>(
      loc, "sizes", b.getFunctionType({}, {value.getType()}));
  b.setInsertionPointToEnd(function.addEntryBlock());
  mlir::IRMapping mapping;
  for (mlir::Operation *op : mlir::topologicalSort(slice))
    b.clone(*op, mapping);
  b.create<mlir::func::ReturnOp>(loc, mapping.lookup(value));
  // A failure is reported as the node's dependence on tensor data.
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  auto values = reference::evaluate(function, {}, {});
  if (mlir::failed(values))
    return std::nullopt;
  return values->front();
}

Known Importer::adoptAlias(jit::Node *node, const Frame &frame,
                           const OperatorRun &run, const at::Tensor &result,
                           Known fresh) {
  for (const auto &[input, passed] : run.tensorInputs) {
    if (!result.is_alias_of(passed))
      continue;
    // The op returned its input itself (an in-place op, dropout in eval
    // mode) or a view no steps describe.
    Known alias = Known::viewOf(input, {}, fresh.shadow);
    alias.lastRead = fresh.lastRead;
    alias.lastReadVersion = input.storage->version;
    bool same = result.sizes() == passed.sizes() &&
                result.strides() == passed.strides() &&
                result.storage_offset() == passed.storage_offset() &&
                result.scalar_type() == passed.scalar_type();
    alias.constant = same ? input.constant : fresh.constant;
    if (!same && alias.opaqueView.empty())
      alias.opaqueView = describeAt(node, frame);
    assert((!alias.isConstant() || alias.constant.isTensor()) &&
           "a view of a compile-time tensor without its compile-time value");
    return alias;
  }
  return fresh;
}

std::optional<OperatorRun>
Importer::computeShadows(jit::Node *node, Frame &frame, std::string *why) {
  // Meta tensors give shapes and dtypes without computing; ops without a
  // meta kernel run on zero-filled tensors of the same shapes instead (on
  // copies of compile-time values, whose data some shapes depend on). Each
  // run gets tensors of its own, so that an in-place op changes no shared
  // shadow or value.
  auto run = [&](bool onMeta) -> std::optional<OperatorRun> {
    auto tensorFor = [&](const Known &tensor) {
      if (onMeta)
        return tensor.shadow.alias();
      if (tensor.isConstant())
        return tensor.constant.toTensor().clone();
      return at::empty_strided(tensor.shadow.sizes(), tensor.shadow.strides(),
                               tensor.shadow.options().device(at::kCPU))
          .zero_();
    };
    OperatorRun run;
    std::vector<c10::IValue> stack = inputStack(node, frame, run, tensorFor);
    try {
      node->getOperation()(stack);
    } catch (const std::exception &e) {
      if (why)
        *why = llvm::StringRef(e.what()).split('\n').first.str();
      return std::nullopt;
    }
    run.results = std::move(stack);
    return run;
  };
  std::optional<OperatorRun> result = run(/*onMeta=*/true);
  if (!result)
    result = run(/*onMeta=*/false);
  return result;
}

/// What a lowering sees of a result tensor: its shadow only.
static Known shadowOf(const at::Tensor &result) {
  Known known;
  known.kind = Known::Kind::Tensor;
  known.shadow = result.is_meta() ? result : metaLike(result);
  return known;
}

/// What a lowering sees of the results of an operator run: tensors as meta
/// shadows, lists of tensors as aggregates of them.
static std::vector<Known> shadowsOf(const std::vector<c10::IValue> &results) {
  std::vector<Known> shadows;
  for (const c10::IValue &result : results) {
    if (result.isTensor()) {
      shadows.push_back(shadowOf(result.toTensor()));
    } else if (result.isTensorList()) {
      std::vector<Known> elements;
      for (const at::Tensor &t : result.toTensorVector())
        elements.push_back(shadowOf(t));
      shadows.push_back(Known::ofAggregate(std::move(elements)));
    } else {
      shadows.push_back(Known::ofConstant(result));
    }
  }
  return shadows;
}

void Importer::lowerTensorOp(jit::Node *node, Frame &frame) {
  mlir::Location loc = locationOf(node, frame);
  std::string kind = node->kind().toQualString();
  std::optional<size_t> written = writtenArgument(node);
  const auto &lowerings = getLowerings();
  const auto &views = getViewLowerings();
  auto lowering = lowerings.find(kind);
  // aten::add_ lowers as aten::add, whose result is then written.
  bool functional = lowering == lowerings.end() && written == 0 &&
                    llvm::StringRef(kind).endswith("_");
  if (functional)
    lowering = lowerings.find(llvm::StringRef(kind).drop_back());
  auto view = views.find(kind);
  if (written && *written != 0) {
    error(loc, describe(node, frame) + " writes its argument '" +
                   node->schema().arguments()[*written].name() +
                   "' in place; slapoc models in-place writes to an op's "
                   "first argument only");
    return placeholdOutputs(node, frame, loc);
  }
  if (lowering == lowerings.end() && (view == views.end() || written)) {
    // One report per op and source line: a layer class used N times would
    // otherwise repeat the same message N times.
    std::string key = kind;
    llvm::raw_string_ostream os(key);
    os << loc;
    if (reportedUnsupported.insert(os.str()).second)
      error(loc, "unsupported TorchScript op '" + kind + "'" +
                     (frame.modulePath.empty()
                          ? std::string(" in the root module")
                          : " in module '" + frame.modulePath + "'"));
    else
      failed = true;
    return placeholdOutputs(node, frame, loc);
  }
  std::string why;
  std::optional<OperatorRun> run = computeShadows(node, frame, &why);
  if (!run) {
    failed = true;
    mlir::InFlightDiagnostic diagnostic =
        mlir::emitError(loc) << "cannot infer the result shape of '" << kind
                             << "' for these static input shapes: " << why;
    for (const InputSpec &input : inputs) {
      mlir::Diagnostic &note = diagnostic.attachNote(input.declaration);
      note << "input " << input.declaredStr()
           << (input.declaration ? " declared here" : " given by --input");
      if (input.batchShares > 1)
        note << "; each share of its split over " << input.batchSplit
             << " is " << input.str();
    }
    return frame.poisonOutputs(node);
  }
  for (const Known &shadow : shadowsOf(run->results))
    if (shadow.is(Known::Kind::Tensor) &&
        !getTensorType(&context, shadow.shadow)) {
      error(loc, "'" + kind + "' produces unsupported dtype " +
                     std::string(c10::toString(shadow.shadow.scalar_type())));
      return frame.poisonOutputs(node);
    }
  if (written)
    return lowerInPlace(node, frame, lowering->second, functional,
                        std::move(*run));
  if (view != views.end())
    return lowerView(node, frame, view->second, std::move(*run));

  NodeLowering lower(*this, node, frame, shadowsOf(run->results));
  if (mlir::failed(lowering->second(lower))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  for (size_t i = 0; i < node->outputs().size(); ++i)
    if (run->results[i].isTensor())
      frame.values[node->outputs()[i]] =
          adoptAlias(node, frame, *run, run->results[i].toTensor(),
                     frame.values[node->outputs()[i]]);
}

void Importer::lowerView(jit::Node *node, Frame &frame, ViewFn describeView,
                         OperatorRun run) {
  mlir::Location loc = locationOf(node, frame);
  NodeLowering lower(*this, node, frame, shadowsOf(run.results));
  std::vector<ViewPath> paths;
  const Known input = frame.values[node->input(0)];
  if (!input.is(Known::Kind::Tensor)) {
    lower.report("input 0 must be a tensor");
    failed = true;
    return frame.poisonOutputs(node);
  }
  if (mlir::failed(describeView(lower, paths))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  // Input 0 is the first tensor the operator was given.
  const at::Tensor &passed = run.tensorInputs.front().second;
  mlir::Value inputValue;
  if (!input.isConstant() &&
      !(inputValue = read(input, loc, describe(node, frame)))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  auto nextPath = paths.begin();
  auto viewResult = [&](const at::Tensor &result) -> Known {
    const ViewPath &path = *nextPath++;
    at::Tensor shadow = shadowOf(result).shadow;
    bool aliases = result.is_alias_of(passed);
    if (aliases && result.scalar_type() != passed.scalar_type()) {
      lower.report("reinterprets a tensor's memory as another dtype, which "
                   "slapoc does not support");
      failed = true;
      return Known::poison();
    }
    if (input.isConstant()) {
      at::Tensor value = applyView(path, input.constant.toTensor());
      if (aliases) {
        Known known = Known::viewOf(input, path, shadow);
        known.constant = value;
        return known;
      }
      // A copy with the layout of the shadow, so that views of it are views
      // exactly where PyTorch makes them.
      at::Tensor copy =
          at::empty_strided(shadow.sizes(), shadow.strides(),
                            value.options().dtype(shadow.scalar_type()));
      return Known::ofConstant(copy.copy_(value));
    }
    mlir::Value value = applyView(builder, loc, path, inputValue);
    if (aliases) {
      Known known = Known::viewOf(input, path, shadow);
      known.lastRead = value;
      known.lastReadVersion = input.storage->version;
      return known;
    }
    return Known::ofTensor(
        lower.cast(value, getTensorType(&context, shadow).getElementType()),
        shadow);
  };
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const c10::IValue &result = run.results.at(i);
    if (result.isTensor()) {
      frame.values[node->outputs()[i]] = viewResult(result.toTensor());
      continue;
    }
    std::vector<Known> elements;
    for (const at::Tensor &element : result.toTensorVector())
      elements.push_back(viewResult(element));
    frame.values[node->outputs()[i]] = Known::ofAggregate(std::move(elements));
  }
}

/// Runs the functional variant of in-place `node` (aten::add for
/// aten::add_) on `stack`: its result has the dtype PyTorch computes in,
/// which may differ from the written tensor's (a bf16 tensor times an f32
/// one computes in f32).
static std::optional<std::vector<c10::IValue>>
runFunctionalVariant(jit::Node *node, std::vector<c10::IValue> stack) {
  llvm::StringRef kind = node->kind().toQualString();
  const c10::FunctionSchema &inPlace = node->schema();
  for (const std::shared_ptr<jit::Operator> &op : jit::getAllOperatorsFor(
           c10::Symbol::fromQualString(kind.drop_back().str()))) {
    const c10::FunctionSchema &schema = op->schema();
    if (schema.arguments().size() != inPlace.arguments().size() ||
        !llvm::all_of(llvm::seq<size_t>(0, schema.arguments().size()),
                      [&](size_t i) {
                        return *schema.arguments()[i].type() ==
                               *inPlace.arguments()[i].type();
                      }))
      continue;
    try {
      op->getOperation()(stack);
      return stack;
    } catch (const std::exception &) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void Importer::lowerInPlace(jit::Node *node, Frame &frame, LoweringFn lowering,
                            bool functional, OperatorRun run) {
  mlir::Location loc = locationOf(node, frame);
  const Known self = frame.values[node->input(0)];
  auto fail = [&](const llvm::Twine &message) {
    error(loc, describe(node, frame) + " " + message);
    frame.poisonOutputs(node);
  };
  if (!self.is(Known::Kind::Tensor))
    return fail("writes in place into a value that is not a tensor");
  // The run on shadows checked that PyTorch accepts the write (dtypes,
  // shapes, no element written twice); the written tensor keeps its shape.
  if (!sameLayout(run.results.at(0).toTensor(), self.shadow))
    return fail(kChangesShape);
  std::vector<Known> shadows = shadowsOf(run.results);
  if (functional) {
    OperatorRun functionalRun;
    auto fresh = [](const Known &tensor) { return tensor.shadow.alias(); };
    if (auto results = runFunctionalVariant(
            node, inputStack(node, frame, functionalRun, fresh)))
      shadows = shadowsOf(*results);
  }
  NodeLowering lower(*this, node, frame, std::move(shadows));
  if (mlir::failed(lowering(lower))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  mlir::Value value =
      read(frame.values[node->output(0)], loc, describe(node, frame));
  if (!value) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  TensorBuilder g(builder, loc);
  mlir::RankedTensorType selfType = getTensorType(&context, self.shadow);
  value = g.broadcastTo(g.cast(value, selfType.getElementType()),
                        selfType.getShape());
  llvm::StringRef kind = node->kind().toQualString();
  bool uniform = kind == "aten::fill_" || kind == "aten::zero_";
  if (mlir::failed(write(self, value, uniform, node, frame))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  // The op returns the tensor it wrote.
  Known updated = Known::viewOf(self, {}, self.shadow);
  updated.lastRead = value;
  updated.lastReadVersion = self.storage->version;
  frame.values[node->output(0)] = updated;
}

void Importer::placeholdOutputs(jit::Node *node, Frame &frame,
                                mlir::Location loc) {
  // Typed stand-ins let the import go on, so that every other problem in the
  // model is reported in the same run; the module is discarded anyway.
  std::optional<OperatorRun> run = computeShadows(node, frame);
  std::vector<Known> shadows;
  if (run)
    shadows = shadowsOf(run->results);
  std::function<Known(const Known &)> placehold = [&](const Known &shadow) {
    if (shadow.is(Known::Kind::Aggregate)) {
      std::vector<Known> elements;
      for (const Known &element : *shadow.elements)
        elements.push_back(placehold(element));
      return Known::ofAggregate(std::move(elements));
    }
    mlir::RankedTensorType type;
    if (shadow.is(Known::Kind::Tensor))
      type = getTensorType(&context, shadow.shadow);
    if (!type)
      return Known::poison();
    auto standIn = builder.create<mlir::UnrealizedConversionCastOp>(
        loc, mlir::TypeRange{type}, mlir::ValueRange{});
    return Known::ofTensor(standIn.getResult(0), shadow.shadow);
  };
  for (size_t i = 0; i < node->outputs().size(); ++i)
    frame.values[node->outputs()[i]] =
        run ? placehold(shadows.at(i)) : Known::poison();
}

mlir::Value Importer::materialize(const at::Tensor &value, mlir::Location loc) {
  at::Tensor contiguous = value.contiguous().cpu();
  mlir::RankedTensorType type = getTensorType(&context, contiguous);
  mlir::Type elementType = type.getElementType();
  bool splat = contiguous.numel() > 0 &&
               contiguous.eq(contiguous.flatten()[0]).all().item<bool>();
  at::Tensor data = splat ? contiguous.flatten().slice(0, 0, 1) : contiguous;
  mlir::DenseElementsAttr attr;
  mlir::RankedTensorType dataType =
      splat ? mlir::RankedTensorType::get({}, elementType) : type;
  if (elementType.isa<mlir::FloatType>()) {
    at::Tensor asDouble = data.to(at::kDouble);
    llvm::SmallVector<llvm::APFloat> values;
    const auto &semantics =
        elementType.cast<mlir::FloatType>().getFloatSemantics();
    for (int64_t i = 0; i < asDouble.numel(); ++i) {
      llvm::APFloat v(asDouble.data_ptr<double>()[i]);
      bool lost;
      v.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    attr = mlir::DenseElementsAttr::get(dataType, values);
  } else {
    at::Tensor asLong = data.to(at::kLong);
    unsigned width = elementType.getIntOrFloatBitWidth();
    llvm::SmallVector<llvm::APInt> values;
    for (int64_t i = 0; i < asLong.numel(); ++i)
      values.push_back(llvm::APInt(width, asLong.data_ptr<int64_t>()[i],
                                   /*isSigned=*/width > 1));
    attr = mlir::DenseElementsAttr::get(dataType, values);
  }
  if (splat)
    attr = mlir::DenseElementsAttr::get(type,
                                        attr.getSplatValue<mlir::Attribute>());
  return builder.create<ConstantOp>(loc, attr).getResult();
}

} // namespace torchscript

c10::IValue callForward(torch::jit::Module &module, mlir::func::FuncOp forward,
                        llvm::ArrayRef<at::Tensor> inputs) {
  bool appendedLoss = forward->hasAttr(kAppendedLossAttrName);
  llvm::ArrayRef<at::Tensor> arguments =
      appendedLoss ? inputs.drop_back() : inputs;
  c10::IValue output = module.forward(
      std::vector<c10::IValue>(arguments.begin(), arguments.end()));
  if (!appendedLoss)
    return output;
  at::Tensor logits = output.toTensor();
  return at::cross_entropy_loss(logits.flatten(0, -2), inputs.back().flatten(),
                                /*weight=*/{}, at::Reduction::Mean,
                                kIgnoredTarget);
}

} // namespace slapo
