//===- slapo-opt.cpp - mlir-opt over the slapo dialect and passes ---------===//
#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  slapo::registerSlapoTransformsPasses();
  slapo::registerTrainingPipeline();
  mlir::DialectRegistry registry;
  registry.insert<slapo::SlapoDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "slapo optimizer driver\n", registry));
}
