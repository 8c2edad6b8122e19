//===- Importer.cpp - walks TorchScript graphs into slapo IR --------------===//
#include "Importer.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Reference/Interpreter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

#include <ATen/ATen.h>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
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

Known Known::ofTensor(mlir::Value value, at::Tensor shadow) {
  Known known;
  known.kind = Kind::Tensor;
  known.tensor = value;
  known.shadow = std::move(shadow);
  return known;
}

Known Known::ofConstant(c10::IValue value) {
  Known known;
  known.kind = Kind::Constant;
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
  known.elements = std::move(elements);
  return known;
}

bool Known::isConstant() const {
  if (kind == Kind::Constant)
    return true;
  return kind == Kind::Aggregate &&
         llvm::all_of(elements, [](const Known &e) { return e.isConstant(); });
}

/// The IValue an operator sees for `known` of TorchScript type `type`: lists
/// and tuples are typed as the operator schemas expect, and runtime tensors
/// are replaced by `tensorFor(known)` (their shadow, or data of that shape).
static c10::IValue
toIValue(const Known &known, const c10::TypePtr &type,
         llvm::function_ref<at::Tensor(const Known &)> tensorFor) {
  if (known.is(Known::Kind::Constant))
    return known.constant;
  if (known.is(Known::Kind::Tensor))
    return tensorFor(known);
  if (auto tupleType = type->cast<c10::TupleType>()) {
    std::vector<c10::IValue> elements;
    for (size_t i = 0; i < known.elements.size(); ++i)
      elements.push_back(
          toIValue(known.elements[i], tupleType->elements().at(i), tensorFor));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  c10::TypePtr elementType = known.isConstant()
                                 ? c10::AnyType::get()
                                 : c10::TypePtr(c10::TensorType::get());
  if (auto listType = type->cast<c10::ListType>())
    elementType = listType->getElementType();
  c10::impl::GenericList list(elementType);
  for (const Known &element : known.elements)
    list.push_back(toIValue(element, elementType, tensorFor));
  return list;
}

static at::Tensor shadowOf(const Known &tensor) { return tensor.shadow; }

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

static at::Tensor metaLike(const at::Tensor &tensor) {
  return at::empty(
      tensor.sizes(),
      at::TensorOptions().dtype(tensor.scalar_type()).device(at::kMeta));
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

mlir::Location Importer::locationOf(jit::Node *node, const Frame &frame) {
  return withModulePath(frame.modulePath, sourceLocationOf(node, frame));
}

std::string Importer::describe(jit::Node *node, const Frame &frame) {
  std::string op = "'" + std::string(node->kind().toQualString()) + "'";
  if (frame.modulePath.empty())
    return op + " in the root module";
  return op + " in module '" + frame.modulePath + "'";
}

mlir::Location Importer::paramLocation(llvm::StringRef name) {
  // PyTorch forbids '.' inside attribute names: the owner is the prefix.
  auto [owner, leaf] = name.rsplit('.');
  return withModulePath(leaf.empty() ? "" : owner,
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
  for (size_t i = inputs.size(); i < arguments.size(); ++i)
    args.push_back(Known::ofConstant(*arguments[i].default_value()));

  std::vector<Known> outputs = importGraph(*forward.graph(), args, "", fileLoc);

  // Tuples returned by forward become the function's results, in order.
  std::vector<Known> flat;
  std::function<void(const Known &)> flatten = [&](const Known &known) {
    if (known.is(Known::Kind::Aggregate))
      for (const Known &element : known.elements)
        flatten(element);
    else
      flat.push_back(known);
  };
  for (const Known &output : outputs)
    flatten(output);
  llvm::SmallVector<mlir::Value> results;
  for (const Known &output : flat) {
    if (output.is(Known::Kind::Tensor))
      results.push_back(output.tensor);
    else if (output.is(Known::Kind::Constant) && output.constant.isTensor())
      results.push_back(materialize(output.constant.toTensor(), fileLoc));
    else if (!output.is(Known::Kind::Poison))
      error(fileLoc,
            "forward returns a " + output.constant.tagKind() +
                "; only tensors (or tuples of tensors) can be outputs");
  }
  if (failed)
    return nullptr;
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
    else
      frame.values[node->output()] =
          Known::ofConstant(*jit::toIValue(node->output()));
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
      frame.values[node->outputs()[i]] = aggregate.elements.at(i);
    return;
  }
  case c10::prim::TupleIndex:
  case c10::aten::__getitem__: {
    Known aggregate = frame.values.lookup(node->input(0));
    Known index = frame.values.lookup(node->input(1));
    if (aggregate.is(Known::Kind::Aggregate) && index.isConstant() &&
        index.constant.isInt()) {
      int64_t i = index.constant.toInt();
      int64_t size = aggregate.elements.size();
      if (i < 0)
        i += size;
      if (i >= 0 && i < size) {
        frame.values[node->output()] = aggregate.elements[i];
        return;
      }
    }
    break;
  }
  case c10::aten::append: {
    Known &list = frame.values[node->input(0)];
    if (list.is(Known::Kind::Aggregate)) {
      list.elements.push_back(frame.values.lookup(node->input(1)));
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
  else
    frame.values[node->output()] = Known::ofConstant(value);
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
    mlir::OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(module.getBody(),
                              std::prev(module.getBody()->end()));
    it = params
             .try_emplace(value.unsafeGetTensorImpl(),
                          builder.create<ParamOp>(
                              paramLocation(fullName), fullName, type,
                              /*buffer=*/true, /*aliases=*/nullptr,
                              /*shard_axis=*/nullptr, /*shard_chunks=*/nullptr))
             .first;
  }
  ParamOp param = it->second;
  auto get = builder.create<GetParamOp>(loc, param.getTensorType(),
                                        param.getSymName());
  return Known::ofTensor(get.getResult(), metaLike(value));
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

/// Evaluates at compile time what does not depend on tensor data: nodes with
/// only constant inputs, and nodes that read only shapes and dtypes (their
/// tensor inputs replaced by meta shadows). Returns false for tensor ops.
bool Importer::tryEvaluate(jit::Node *node, Frame &frame) {
  if (!node->maybeOperator() || isNondeterministic(node))
    return false;
  bool allConstant = true;
  for (const jit::Value *input : node->inputs())
    allConstant &= frame.values.lookup(input).isConstant();
  bool producesTensor = llvm::any_of(node->outputs(), [](const jit::Value *v) {
    return isTensorType(v->type());
  });
  if (!allConstant && producesTensor)
    return false;
  // In-place ops on constants would mutate what other uses see.
  if (!allConstant &&
      llvm::StringRef(node->kind().toUnqualString()).endswith("_"))
    return false;

  std::vector<c10::IValue> stack;
  for (const jit::Value *input : node->inputs()) {
    const Known &known = frame.values.lookup(input);
    // Modules and aggregates of runtime tensors are not evaluated here.
    if (!known.is(Known::Kind::Tensor) && !known.isConstant())
      return false;
    stack.push_back(toIValue(known, input->type(), shadowOf));
  }
  try {
    node->getOperation()(stack);
  } catch (const std::exception &e) {
    if (allConstant)
      error(locationOf(node, frame),
            "evaluating " + describe(node, frame) +
                " at compile time failed: " +
                llvm::StringRef(e.what()).split('\n').first);
    else
      error(locationOf(node, frame),
            describe(node, frame) +
                " depends on tensor data, so its result cannot be made "
                "static");
    frame.poisonOutputs(node);
    return true;
  }
  for (size_t i = 0; i < node->outputs().size(); ++i)
    frame.values[node->outputs()[i]] = Known::ofConstant(stack.at(i));
  return true;
}

std::optional<std::vector<Known>> Importer::computeShadows(jit::Node *node,
                                                           Frame &frame) {
  // Meta tensors give shapes and dtypes without computing; ops without a
  // meta kernel run on zero-filled tensors of the same shapes instead.
  auto run = [&](bool onMeta) -> std::optional<std::vector<c10::IValue>> {
    auto tensorFor = [&](const Known &tensor) {
      return onMeta ? tensor.shadow
                    : at::zeros(tensor.shadow.sizes(),
                                tensor.shadow.options().device(at::kCPU));
    };
    std::vector<c10::IValue> stack;
    for (const jit::Value *input : node->inputs())
      stack.push_back(
          toIValue(frame.values.lookup(input), input->type(), tensorFor));
    try {
      node->getOperation()(stack);
    } catch (const std::exception &) {
      return std::nullopt;
    }
    return stack;
  };
  std::optional<std::vector<c10::IValue>> results = run(/*onMeta=*/true);
  if (!results)
    results = run(/*onMeta=*/false);
  if (!results)
    return std::nullopt;
  std::vector<Known> shadows;
  for (const c10::IValue &result : *results) {
    if (result.isTensor()) {
      shadows.push_back(Known::ofTensor({}, metaLike(result.toTensor())));
    } else if (result.isTensorList()) {
      std::vector<Known> elements;
      for (const at::Tensor &t : result.toTensorVector())
        elements.push_back(Known::ofTensor({}, metaLike(t)));
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
  bool inPlace = llvm::StringRef(kind).endswith("_") &&
                 !llvm::StringRef(kind).endswith("__");
  std::string functional = inPlace ? kind.substr(0, kind.size() - 1) : kind;
  const auto &lowerings = getLowerings();
  auto lowering = lowerings.find(functional);
  if (lowering == lowerings.end()) {
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
  std::optional<std::vector<Known>> shadows = computeShadows(node, frame);
  if (!shadows) {
    error(loc, "cannot infer the result shape of '" + kind +
                   "' for these static input shapes");
    return frame.poisonOutputs(node);
  }
  for (const Known &shadow : *shadows)
    if (shadow.is(Known::Kind::Tensor) &&
        !getTensorType(&context, shadow.shadow)) {
      error(loc, "'" + kind + "' produces unsupported dtype " +
                     std::string(c10::toString(shadow.shadow.scalar_type())));
      return frame.poisonOutputs(node);
    }
  NodeLowering lower(*this, node, frame, std::move(*shadows));
  if (mlir::failed(lowering->second(lower))) {
    failed = true;
    return frame.poisonOutputs(node);
  }
  if (inPlace)
    frame.values[node->input(0)] = frame.values.lookup(node->output(0));
}

void Importer::placeholdOutputs(jit::Node *node, Frame &frame,
                                mlir::Location loc) {
  // Typed stand-ins let the import go on, so that every other problem in the
  // model is reported in the same run; the module is discarded anyway.
  std::optional<std::vector<Known>> shadows = computeShadows(node, frame);
  std::function<Known(const Known &)> placehold = [&](const Known &shadow) {
    if (shadow.is(Known::Kind::Aggregate)) {
      std::vector<Known> elements;
      for (const Known &element : shadow.elements)
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
        shadows ? placehold(shadows->at(i)) : Known::poison();
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
} // namespace slapo
