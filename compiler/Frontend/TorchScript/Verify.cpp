//===- Verify.cpp - a compiled step against LibTorch autograd -------------===//
#include "slapo/Frontend/Verify.h"

#include "Importer.h"
#include "RuntimeTensor.h"
#include "slapo/Reference/Interpreter.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/SafeTensors.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <ATen/ATen.h>
#include <torch/script.h>

#include <set>

namespace slapo {
namespace {

/// The loss of step 1 in a --log-json file.
llvm::Expected<double> readLoss(llvm::StringRef logPath) {
  auto buffer = llvm::MemoryBuffer::getFile(logPath);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   logPath + ": " + buffer.getError().message());
  llvm::StringRef firstLine = (*buffer)->getBuffer().split('\n').first;
  auto record = llvm::json::parse(firstLine);
  if (!record)
    return record.takeError();
  std::optional<double> loss =
      record->getAsObject() ? record->getAsObject()->getNumber("loss")
                            : std::nullopt;
  if (!loss)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   logPath + ": no loss in its first line");
  return *loss;
}

} // namespace

mlir::LogicalResult verifyTraining(TorchScriptModel &model,
                                   mlir::func::FuncOp forward, uint64_t seed,
                                   double tolerance, llvm::StringRef workDir,
                                   RunStep runStep, llvm::raw_ostream &report) {
  auto fail = [&](const llvm::Twine &message) {
    mlir::emitError(forward.getLoc()) << "verify: " << message;
    return mlir::failure();
  };
  // The program draws its own masks (slapo.dropout), not PyTorch's: the two
  // steps would differ by design.
  if (!forward.getBody().front().getOps<DropoutOp>().empty())
    return fail("the model has dropout in training mode, whose masks the "
                "compiled program draws otherwise than PyTorch; verify an "
                "eval-mode export");
  at::manual_seed(seed);
  std::vector<at::Tensor> inputs = reference::randomInputs(forward);

  // The program reads the inputs as a batch file of one batch.
  llvm::SmallString<256> batchPath(workDir), logPath(workDir),
      gradsPath(workDir);
  llvm::sys::path::append(batchPath, "batch.safetensors");
  llvm::sys::path::append(logPath, "log.json");
  llvm::sys::path::append(gradsPath, "grads.safetensors");
  std::vector<at::Tensor> batches;
  std::vector<rt::NamedTensor> named;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto name = forward.getArgAttrOfType<mlir::StringAttr>(i, "slapo.name");
    if (!name || !toRuntimeDType(input.scalar_type()))
      return fail("input #" + llvm::Twine(i) + " cannot be written");
    batches.push_back(input.unsqueeze(0).contiguous());
    named.push_back({name.getValue().str(), viewOf(batches.back())});
  }
  try {
    rt::writeSafeTensors(std::string(batchPath), named);
  } catch (const rt::Error &e) {
    return fail(e.what());
  }
  if (llvm::Error e = runStep(batchPath, logPath, gradsPath))
    return fail("running the compiled program failed: " +
                llvm::toString(std::move(e)));
  llvm::Expected<double> programLoss = readLoss(logPath);
  if (!programLoss)
    return fail(llvm::toString(programLoss.takeError()));

  // The same step in LibTorch: the model as exported, autograd on its loss.
  torch::jit::Module &module = model.getImpl().module;
  at::Tensor torchLoss;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  try {
    // A tied tensor is listed under each of its names; the program knows it
    // by the first.
    std::set<const void *> seen;
    for (const auto &param : module.named_parameters(/*recurse=*/true)) {
      if (!seen.insert(param.value.unsafeGetTensorImpl()).second)
        continue;
      param.value.mutable_grad() = at::Tensor();
      param.value.set_requires_grad(true);
      parameters.emplace_back(param.name, param.value);
    }
    KeepBuffers keep(module);
    torchLoss = callForward(module, forward, inputs).toTensor();
    torchLoss.backward();
  } catch (const std::exception &e) {
    return fail("the TorchScript model's step failed: " +
                llvm::StringRef(e.what()).split('\n').first);
  }

  double lossError = std::abs(*programLoss - torchLoss.item<double>()) /
                     std::max(std::abs(torchLoss.item<double>()), 1e-30);
  report << llvm::format("verify: loss %.9g vs LibTorch %.9g: relative "
                         "error %.2e\n",
                         *programLoss, torchLoss.item<double>(), lossError);
  if (!(lossError <= tolerance))
    return fail(llvm::formatv("the loss differs from LibTorch's: relative "
                              "error {0:e} exceeds the tolerance {1:e}",
                              lossError, tolerance)
                    .str());

  double largest = 1e-30;
  for (auto &[name, value] : parameters)
    if (value.grad().defined())
      largest = std::max(largest, value.grad().abs().max().item<double>());
  try {
    rt::SafeTensorsReader grads{std::string(gradsPath)};
    std::string worstName;
    double worst = -1;
    for (auto &[name, value] : parameters) {
      at::Tensor expected = value.grad().defined()
                                ? value.grad()
                                : at::zeros_like(value);
      at::Tensor actual = at::empty_like(expected).contiguous();
      grads.read(name, viewOf(actual));
      double scale =
          std::max(expected.abs().max().item<double>(), 1e-4 * largest);
      double error =
          (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max()
              .item<double>() /
          scale;
      if (!(error <= worst) || worstName.empty()) {
        worst = error;
        worstName = name;
      }
    }
    report << llvm::format("verify: %zu gradients; worst '%s': relative "
                           "error %.2e (tolerance %.0e)\n",
                           parameters.size(), worstName.c_str(), worst,
                           tolerance);
    if (!(worst <= tolerance))
      return fail(llvm::formatv("the gradient of '{0}' differs from LibTorch "
                                "autograd: relative error {1:e} exceeds the "
                                "tolerance {2:e}",
                                worstName, worst, tolerance)
                      .str());
  } catch (const rt::Error &e) {
    return fail(e.what());
  }
  return mlir::success();
}

} // namespace slapo
