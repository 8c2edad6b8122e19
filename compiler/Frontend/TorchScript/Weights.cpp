//===- Weights.cpp - a model's parameters as the rank program reads them --===//
#include "slapo/Frontend/Weights.h"

#include "Importer.h"
#include "RuntimeTensor.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Reference/Interpreter.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/SafeTensors.h"
#include "slapo/runtime/Shard.h"

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

} // namespace

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
