//===- FrontendTest.cpp - unit tests of the TorchScript frontend ----------===//
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/ImportCheck.h"
#include "slapo/Frontend/InputSpec.h"
#include "slapo/Frontend/TorchScriptImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <catch2/catch.hpp>

namespace {

std::string errorText(llvm::Error error) {
  return llvm::toString(std::move(error));
}

TEST_CASE("parseInputSpec reads name, dtype and static shape", "[frontend]") {
  auto spec = slapo::parseInputSpec("input_ids=i64[8,128]");
  REQUIRE(bool(spec));
  CHECK(spec->name == "input_ids");
  CHECK(spec->dtype == "i64");
  CHECK(spec->shape == std::vector<int64_t>{8, 128});
  CHECK(spec->str() == "input_ids=i64[8,128]");

  auto scalar = slapo::parseInputSpec("scale=f32[]");
  REQUIRE(bool(scalar));
  CHECK(scalar->shape.empty());

  auto spaced = slapo::parseInputSpec("mask=i1[ 2 , 1 ]");
  REQUIRE(bool(spaced));
  CHECK(spaced->shape == std::vector<int64_t>{2, 1});

  mlir::MLIRContext context;
  CHECK(spec->getType(context).getElementType().isInteger(64));
  CHECK(slapo::parseDtype(context, "bf16").isBF16());
  CHECK(!slapo::parseDtype(context, "f8"));
}

TEST_CASE("parseInputSpec explains what is wrong", "[frontend]") {
  auto contains = [](llvm::StringRef text, llvm::StringRef expected) {
    auto spec = slapo::parseInputSpec(text);
    REQUIRE(!bool(spec));
    std::string message = errorText(spec.takeError());
    INFO(message);
    CHECK(llvm::StringRef(message).contains(expected));
  };
  contains("x", "missing name or type");
  contains("=f32[1]", "missing name or type");
  contains("x-y=f32[1]", "Python identifier");
  contains("x=f32", "shape must be in brackets");
  contains("x=f32[2", "shape must be in brackets");
  contains("x=q8[2]",
           "unknown dtype 'q8'; valid: f32, f64, bf16, f16, i64, i32, i8, i1");
  contains("x=f32[2,0]", "dimension '0' is not a positive integer");
  contains("x=f32[2,,3]", "dimension '' is not a positive integer");
  contains("x=f32[2a]", "dimension '2a' is not a positive integer");
}

/// A test model exported with the project's exporter into a temporary file
/// and loaded, with the diagnostics of its context collected.
struct LoadedModel {
  explicit LoadedModel(llvm::StringRef name) {
    REQUIRE(!llvm::sys::fs::createTemporaryFile("slapo-unit", "pt", path));
    std::string command = "/usr/bin/python3 " SLAPO_SOURCE_DIR
                          "/test/models/export.py --model " +
                          name.str() + " --mode script --out " +
                          path.str().str() + " > /dev/null";
    REQUIRE(std::system(command.c_str()) == 0);
    auto loaded = slapo::TorchScriptModel::load(path);
    REQUIRE(bool(loaded));
    model = std::move(*loaded);
  }
  ~LoadedModel() { llvm::sys::fs::remove(path); }

  mlir::OwningOpRef<mlir::ModuleOp>
  import(llvm::ArrayRef<llvm::StringRef> specs) {
    std::vector<slapo::InputSpec> inputs;
    for (llvm::StringRef text : specs) {
      auto spec = slapo::parseInputSpec(text);
      REQUIRE(bool(spec));
      inputs.push_back(*spec);
    }
    return slapo::importTorchScript(context, *model, inputs);
  }

  llvm::SmallString<128> path;
  std::unique_ptr<slapo::TorchScriptModel> model;
  mlir::MLIRContext context;
  std::vector<std::string> diagnostics;
  mlir::ScopedDiagnosticHandler handler{&context, [this](mlir::Diagnostic &d) {
                                          diagnostics.push_back(d.str());
                                          return mlir::success();
                                        }};
};

TEST_CASE("checkImport accepts a faithful import and rejects a wrong one",
          "[frontend]") {
  LoadedModel mlp("mlp");
  mlir::OwningOpRef<mlir::ModuleOp> module = mlp.import({"x=f32[4,16]"});
  REQUIRE(module);

  std::string report;
  llvm::raw_string_ostream os(report);
  CHECK(mlir::succeeded(slapo::checkImport(*module, *mlp.model, 1e-5, 0, os)));
  CHECK(llvm::StringRef(os.str()).contains("within tolerance"));

  // Dropping the relu makes the IR compute something else: the check must
  // notice on random inputs.
  module->walk([](slapo::ReluOp relu) {
    relu.getResult().replaceAllUsesWith(relu.getInput());
    relu.erase();
  });
  report.clear();
  CHECK(mlir::failed(slapo::checkImport(*module, *mlp.model, 1e-5, 0, os)));
  CHECK(llvm::StringRef(os.str()).contains("EXCEEDS"));
  REQUIRE(!mlp.diagnostics.empty());
  CHECK(llvm::StringRef(mlp.diagnostics.back())
            .contains("does not compute what the model computes"));
}

TEST_CASE("importTorchScript reports inputs that do not fit forward",
          "[frontend]") {
  LoadedModel mlpLoss("mlp_loss");
  CHECK(!mlpLoss.import({"x=f32[4,16]"}));
  REQUIRE(mlpLoss.diagnostics.size() == 1);
  CHECK(llvm::StringRef(mlpLoss.diagnostics[0])
            .contains("forward(x, target) takes 2 inputs"));
}

TEST_CASE("TorchScriptModel::load names the file it cannot read",
          "[frontend]") {
  auto missing = slapo::TorchScriptModel::load("/nonexistent/model.pt");
  REQUIRE(!bool(missing));
  CHECK(errorText(missing.takeError()) ==
        "cannot load TorchScript model '/nonexistent/model.pt': no such file");
}

} // namespace
