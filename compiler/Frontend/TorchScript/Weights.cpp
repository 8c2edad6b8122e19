//===- Weights.cpp - a model's parameters as the rank program reads them --===//
#include "slapo/Frontend/Weights.h"

#include "Importer.h"
#include "RuntimeTensor.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Reference/Interpreter.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/SafeTensors.h"

namespace slapo {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::make_error<llvm::StringError>(message,
                                             llvm::inconvertibleErrorCode());
}

} // namespace

llvm::Error writeWeights(TorchScriptModel &model, mlir::ModuleOp module,
                         llvm::StringRef path) {
  std::map<std::string, at::Tensor> state;
  for (const auto &param :
       model.getImpl().module.named_parameters(/*recurse=*/true))
    state[param.name] = param.value.detach();
  for (const auto &buffer :
       model.getImpl().module.named_buffers(/*recurse=*/true))
    state.emplace(buffer.name, buffer.value.detach());

  // The contiguous tensors stay alive until the file is written.
  std::vector<at::Tensor> contiguous;
  std::vector<rt::NamedTensor> tensors;
  for (ParamOp param : module.getOps<ParamOp>()) {
    std::string name = param.getSymName().str();
    auto it = state.find(name);
    if (it == state.end())
      return error("the model has no parameter or buffer '" + name + "'");
    mlir::RankedTensorType type = param.getTensorType();
    std::optional<at::ScalarType> scalarType =
        reference::toScalarType(type.getElementType());
    const at::Tensor &value = it->second;
    if (!scalarType || value.scalar_type() != *scalarType ||
        value.sizes().vec() != std::vector<int64_t>(type.getShape().begin(),
                                                    type.getShape().end()))
      return error("parameter '" + name + "' of the model does not have the "
                   "type the IR was compiled for");
    at::Tensor dense = value.contiguous();
    tensors.push_back({name, viewOf(dense)});
    contiguous.push_back(std::move(dense));
  }
  try {
    rt::writeSafeTensors(path.str(), tensors,
                         {{"model", model.getPath()}});
  } catch (const rt::Error &e) {
    return error(e.what());
  }
  return llvm::Error::success();
}

} // namespace slapo
