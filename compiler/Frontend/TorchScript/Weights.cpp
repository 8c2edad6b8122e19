//===- Weights.cpp - a model's parameters as the rank program reads them --===//
#include "slapo/Frontend/Weights.h"

#include "Importer.h"
#include "RuntimeTensor.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Reference/Interpreter.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/SafeTensors.h"
#include "slapo/runtime/Shard.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

namespace slapo {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::make_error<llvm::StringError>(message,
                                             llvm::inconvertibleErrorCode());
}

rt::Shape shapeOf(mlir::RankedTensorType type) {
  rt::Shape shape;
  shape.rank = type.getRank();
  llvm::copy(type.getShape(), shape.dims);
  return shape;
}

/// The data of `param` that tp rank `tpRank` of `tp` loads, from the model's
/// value `global`: its shard if the param has one, else all of it.
llvm::Expected<at::Tensor> rankValue(ParamOp param, const at::Tensor &global,
                                     int64_t tpRank, int64_t tp) {
  mlir::RankedTensorType type = param.getTensorType();
  std::string irType;
  llvm::raw_string_ostream(irType) << type;
  std::string modelType = std::string(c10::toString(global.scalar_type())) +
                          c10::str(global.sizes());
  auto mismatch = [&](const llvm::Twine &why) {
    return error("parameter '" + param.getSymName() + "' of the model is " +
                 modelType + ", but the IR was compiled for " + irType + why);
  };
  std::optional<at::ScalarType> scalarType =
      reference::toScalarType(type.getElementType());
  if (!scalarType || global.scalar_type() != *scalarType)
    return mismatch("");
  at::Tensor dense = global.contiguous();
  rt::Tensor view = viewOf(dense);
  std::optional<uint64_t> axis = param.getShardAxis();
  if (!axis) {
    if (shapeOf(type) != view.shape)
      return mismatch("");
    return dense;
  }
  rt::ShardLayout layout{
      static_cast<int>(*axis),
      static_cast<int64_t>(param.getShardChunks().value_or(1)), tp};
  try {
    rt::Shape shardShape = rt::getShardShape(view.shape, layout);
    if (shapeOf(type) != shardShape)
      return mismatch(", not for its shard " + shardShape.str() + " (dim " +
                      llvm::Twine(layout.axis) +
                      " divided by tp = " + llvm::Twine(tp) + ")");
    at::Tensor shard = at::empty(
        std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
        dense.options());
    rt::sliceShard(view, viewOf(shard), layout, tpRank);
    return shard;
  } catch (const rt::Error &e) {
    return error("parameter '" + param.getSymName() +
                 "' of the model: " + e.what());
  }
}

/// The size of each tensor record the unpickler asked for, by the data it
/// got: a one-byte stand-in per record, so that checking the records reads
/// each one but keeps none.
class RecordSizes {
public:
  explicit RecordSizes(caffe2::serialize::PyTorchStreamReader &archive)
      : archive(archive) {}

  at::DataPtr read(const std::string &key) {
    std::string name = "data/" + key;
    size_t bytes = std::get<1>(archive.getRecord(name));
    at::DataPtr standIn = c10::GetCPUAllocator()->allocate(1);
    records[standIn.get()] = {name, bytes};
    return standIn;
  }
  /// The record name and size of a storage the unpickler made.
  const std::pair<std::string, size_t> *find(const at::Storage &storage) const {
    auto record = records.find(storage.data());
    return record == records.end() ? nullptr : &record->second;
  }

private:
  caffe2::serialize::PyTorchStreamReader &archive;
  std::map<const void *, std::pair<std::string, size_t>> records;
};

/// Checks the tensor attributes of `object` (named `prefix` + attribute
/// name) and of the objects it holds against their records.
llvm::Error checkObjectRecords(const c10::IValue &object,
                               const std::string &prefix,
                               const RecordSizes &records,
                               const std::string &path) {
  const c10::ivalue::Object &fields = *object.toObject();
  const c10::ClassType &type = *fields.type();
  for (size_t slot = 0; slot < fields.slots().size(); ++slot) {
    const c10::IValue &value = fields.getSlot(slot);
    std::string name = prefix + type.getAttributeName(slot);
    if (value.isObject()) {
      if (llvm::Error e = checkObjectRecords(value, name + ".", records, path))
        return e;
      continue;
    }
    if (!value.isTensor())
      continue;
    const at::Tensor &tensor = value.toTensor();
    const std::pair<std::string, size_t> *record =
        records.find(tensor.storage());
    if (!record)
      continue;
    size_t needed = tensor.numel() == 0
                        ? 0
                        : at::detail::computeStorageNbytes(
                              tensor.sizes(), tensor.strides(),
                              tensor.element_size(), tensor.storage_offset());
    if (record->second >= needed)
      continue;
    std::string kind = type.is_parameter(slot) ? "parameter"
                       : type.is_buffer(slot)  ? "buffer"
                                               : "tensor attribute";
    return error("cannot load TorchScript model '" + path + "': " + kind +
                 " '" + name + "' (" + c10::toString(tensor.scalar_type()) +
                 c10::str(tensor.sizes()) + ") needs " + llvm::Twine(needed) +
                 " bytes, but its record " + record->first + " holds " +
                 llvm::Twine(record->second) +
                 ": the file is truncated or corrupt; export the model again");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error checkTensorRecords(const std::string &path,
                               const torch::jit::Module &module) {
  // The module's pickle is read again, its storages given stand-ins that
  // tell which record each came from.
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    RecordSizes records(archive);
    auto [pickle, pickleBytes] = archive.getRecord("data.pkl");
    size_t offset = 0;
    auto readPickle = [&](char *buffer, size_t length) {
      length = std::min(length, pickleBytes - offset);
      std::memcpy(buffer, static_cast<const char *>(pickle.get()) + offset,
                  length);
      offset += length;
      return length;
    };
    std::shared_ptr<torch::jit::CompilationUnit> unit =
        module._ivalue()->compilation_unit();
    auto resolveType = [&](const c10::QualifiedName &name) {
      return c10::StrongTypePtr(unit, unit->get_type(name));
    };
    // An object's state is the dict of its attributes (modules); an object
    // restored by __setstate__ holds no parameter and stays empty.
    auto loadObject = [](const c10::StrongTypePtr &type, c10::IValue state) {
      auto classType = type.type_->expect<c10::ClassType>();
      auto object =
          c10::ivalue::Object::create(type, classType->numAttributes());
      if (!state.isGenericDict())
        return object;
      c10::Dict<c10::IValue, c10::IValue> attributes = state.toGenericDict();
      for (size_t slot = 0; slot < classType->numAttributes(); ++slot) {
        auto attribute = attributes.find(classType->getAttributeName(slot));
        if (attribute != attributes.end())
          object->setSlot(slot, attribute->value());
      }
      return object;
    };
    torch::jit::Unpickler unpickler(
        readPickle, resolveType, loadObject,
        [&](const std::string &key) { return records.read(key); },
        c10::nullopt);
    unpickler.set_version(archive.version());
    c10::IValue root = unpickler.parse_ivalue();
    if (!root.isObject())
      return error("cannot load TorchScript model '" + path +
                   "': its data.pkl holds no module");
    return checkObjectRecords(root, "", records, path);
  } catch (const c10::Error &e) {
    return error("cannot load TorchScript model '" + path +
                 "': its tensor records cannot be checked (" +
                 llvm::StringRef(e.what()).split('\n').first.trim() + ")");
  }
}

llvm::Error writeWeights(TorchScriptModel &model, mlir::ModuleOp module,
                         int64_t tpRank, int64_t tp, llvm::StringRef path) {
  std::map<std::string, at::Tensor> state;
  for (const auto &param :
       model.getImpl().module.named_parameters(/*recurse=*/true))
    state[param.name] = param.value.detach();
  for (const auto &buffer :
       model.getImpl().module.named_buffers(/*recurse=*/true))
    state.emplace(buffer.name, buffer.value.detach());

  // The rank's tensors stay alive until the file is written.
  std::vector<at::Tensor> values;
  std::vector<rt::NamedTensor> tensors;
  for (ParamOp param : module.getOps<ParamOp>()) {
    std::string name = param.getSymName().str();
    auto it = state.find(name);
    if (it == state.end())
      return error("the model has no parameter or buffer '" + name + "'");
    llvm::Expected<at::Tensor> value = rankValue(param, it->second, tpRank, tp);
    if (!value)
      return value.takeError();
    tensors.push_back({name, viewOf(*value)});
    values.push_back(std::move(*value));
  }
  try {
    rt::writeSafeTensors(path.str(), tensors, {{"model", model.getPath()}});
  } catch (const rt::Error &e) {
    return error(e.what());
  }
  return llvm::Error::success();
}

} // namespace slapo
