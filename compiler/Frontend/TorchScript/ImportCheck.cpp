//===- ImportCheck.cpp - proof that an import is right --------------------===//
#include "slapo/Frontend/ImportCheck.h"

#include "Importer.h"
#include "slapo/Reference/Interpreter.h"

#include "llvm/Support/FormatVariadic.h"

#include <ATen/ATen.h>
#include <torch/version.h>

namespace slapo {

std::string getLibTorchVersion() { return TORCH_VERSION; }

mlir::LogicalResult checkImport(mlir::ModuleOp module, TorchScriptModel &model,
                                double tolerance, uint64_t seed,
                                llvm::raw_ostream &report) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  auto fail = [&](const llvm::Twine &message) {
    mlir::emitError(forward.getLoc()) << "check-import: " << message;
    return mlir::failure();
  };
  auto state = reference::loadTorchScriptState(model.getPath());
  if (!state)
    return fail(llvm::toString(state.takeError()));

  at::manual_seed(seed);
  std::vector<at::Tensor> inputs = reference::randomInputs(forward);

  std::vector<at::Tensor> expected;
  try {
    // Copies: a model may write its inputs in place, and the IR must see
    // them as they were.
    std::vector<at::Tensor> arguments;
    for (const at::Tensor &input : inputs)
      arguments.push_back(input.clone());
    at::manual_seed(seed);
    KeepBuffers keep(model.getImpl().module);
    c10::IValue output =
        callForward(model.getImpl().module, forward, arguments);
    std::function<void(const c10::IValue &)> flatten =
        [&](const c10::IValue &value) {
          if (value.isTuple())
            for (const c10::IValue &element : value.toTupleRef().elements())
              flatten(element);
          else // a copy: the buffers an output may view are restored
            expected.push_back(value.toTensor().clone());
        };
    flatten(output);
  } catch (const std::exception &e) {
    return fail("the TorchScript forward failed: " +
                llvm::StringRef(e.what()).split('\n').first);
  }

  at::manual_seed(seed);
  auto actual = reference::evaluate(forward, inputs, *state);
  if (mlir::failed(actual))
    return mlir::failure();
  if (actual->size() != expected.size())
    return fail("the IR returns " + llvm::Twine(actual->size()) +
                " values, the model " + llvm::Twine(expected.size()));

  bool ok = true;
  for (size_t i = 0; i < expected.size(); ++i) {
    double error = reference::relativeError((*actual)[i], expected[i]);
    bool within = error <= tolerance;
    ok &= within;
    report << llvm::formatv(
        "check-import: output {0} {1}: relative error {2:e} ({3} tolerance "
        "{4:e})\n",
        i, reference::describe(expected[i]), error,
        within ? "within" : "EXCEEDS", tolerance);
  }
  if (!ok)
    return fail("the imported IR does not compute what the model computes");
  return mlir::success();
}

} // namespace slapo
