//===- FrontendTest.cpp - unit tests of the TorchScript frontend ----------===//
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/ImportCheck.h"
#include "slapo/Frontend/InputSpec.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Frontend/Weights.h"
#include "slapo/runtime/SafeTensors.h"

#include "mlir/IR/Builders.h"
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

/// Tensor `name` of the safetensors file `path`, as floats.
std::vector<float> readFloats(const std::string &path,
                              const std::string &name) {
  slapo::rt::SafeTensorsReader reader(path);
  const slapo::rt::SafeTensorsReader::Info &info = reader.getInfo(name);
  REQUIRE(info.dtype == slapo::rt::DType::F32);
  std::vector<float> values(info.shape.getNumElements());
  reader.read(name, slapo::rt::Tensor(values.data(), info.dtype, info.shape));
  return values;
}

TEST_CASE("writeWeights writes a tp rank's shards of the sharded params",
          "[frontend]") {
  LoadedModel mlp("mlp");
  mlir::OwningOpRef<mlir::ModuleOp> module = mlp.import({"x=f32[4,16]"});
  REQUIRE(module);
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("slapo-weights", dir));
  auto file = [&](llvm::StringRef name) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    return path.str().str();
  };
  std::string whole = file("whole.safetensors");
  REQUIRE(errorText(slapo::writeWeights(*mlp.model, *module, 0, 1, whole)) ==
          "");

  // What slapo-shard and sharding propagation make of the params for tp = 2.
  mlir::Builder builder(&mlp.context);
  auto shard = [&](llvm::StringRef name, int64_t axis, int64_t chunks,
                   llvm::ArrayRef<int64_t> shape) {
    auto param = module->lookupSymbol<slapo::ParamOp>(name);
    REQUIRE(param);
    param.setShardAxisAttr(builder.getI64IntegerAttr(axis));
    param.setShardChunksAttr(builder.getI64IntegerAttr(chunks));
    param.setTypeAttr(mlir::TypeAttr::get(
        mlir::RankedTensorType::get(shape, builder.getF32Type())));
  };
  shard("fc1.weight", 0, 2, {16, 16});
  shard("fc1.bias", 0, 2, {16});
  shard("fc2.weight", 1, 1, {8, 16});
  std::vector<float> fc1Weight = readFloats(whole, "fc1.weight");
  std::vector<float> fc1Bias = readFloats(whole, "fc1.bias");
  std::vector<float> fc2Weight = readFloats(whole, "fc2.weight");
  std::vector<float> fc2Bias = readFloats(whole, "fc2.bias");
  for (int64_t rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    std::string path = file("rank" + std::to_string(rank) + ".safetensors");
    REQUIRE(errorText(
                slapo::writeWeights(*mlp.model, *module, rank, 2, path)) == "");
    // fc1's 32 rows are two chunks of 16, each split in two: rank r holds
    // rows 8r..8r+7 and 16+8r..16+8r+7.
    auto fc1Row = [&](int64_t k) {
      return k < 8 ? 8 * rank + k : 16 + 8 * rank + (k - 8);
    };
    std::vector<float> weight = readFloats(path, "fc1.weight");
    std::vector<float> bias = readFloats(path, "fc1.bias");
    for (int64_t k = 0; k < 16; ++k) {
      CHECK(bias[k] == fc1Bias[fc1Row(k)]);
      for (int64_t j = 0; j < 16; ++j)
        CHECK(weight[k * 16 + j] == fc1Weight[fc1Row(k) * 16 + j]);
    }
    // fc2's 32 columns are one chunk: rank r holds columns 16r..16r+15.
    weight = readFloats(path, "fc2.weight");
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t k = 0; k < 16; ++k)
        CHECK(weight[i * 16 + k] == fc2Weight[i * 32 + 16 * rank + k]);
    CHECK(readFloats(path, "fc2.bias") == fc2Bias);
  }

  std::string rejected = file("rejected.safetensors");
  shard("fc2.weight", 1, 1, {8, 32});
  CHECK(errorText(slapo::writeWeights(*mlp.model, *module, 0, 2, rejected)) ==
        "parameter 'fc2.weight' of the model is Float[8, 32], but the IR was "
        "compiled for tensor<8x32xf32>, not for its shard [8, 16] (dim 1 "
        "divided by tp = 2)");
  shard("fc2.weight", 1, 1, {8, 16});
  shard("fc1.weight", 0, 3, {16, 16});
  CHECK(errorText(slapo::writeWeights(*mlp.model, *module, 0, 2, rejected)) ==
        "parameter 'fc1.weight' of the model: cannot shard [32, 16] on dim 0 "
        "in 3 chunk(s) over 2 tp rank(s): 32 is not a multiple of 6");
  CHECK(!llvm::sys::fs::exists(rejected));
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
