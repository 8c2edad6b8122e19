//===- Pipeline.h - the pass pipeline of a training step --------*- C++ -*-===//
//
// The one pipeline from the imported forward (after CSE) to the planned
// training step: slapoc builds it from the schedule's plan, `--emit=schedule`
// prints it as MLIR's textual pipeline (the passes it expands to), and
// slapo-opt runs it by that text or as the registered pipeline
// `slapo-training{...}`.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_PIPELINE_H
#define SLAPO_TRANSFORMS_PIPELINE_H

#include "slapo/Transforms/PassOptions.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace slapo {

/// The mesh, the schedule's primitives and train(); the defaults are those
/// of a schedule that declares none of them.
struct TrainingPipelineOptions
    : mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("data-parallel ranks (slapo-data-parallel "
                                    "averages the gradients over them)"),
                     llvm::cl::init(1)};
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("tensor-parallel ranks"),
                     llvm::cl::init(1)};
  Option<int64_t> pp{*this, "pp",
                     llvm::cl::desc("pipeline stages (the schedule's cuts "
                                    "make them)"),
                     llvm::cl::init(1)};
  Option<int64_t> stage{
      *this, "stage",
      llvm::cl::desc("with pp > 1: the stage whose program the pipeline "
                     "builds (slapo-pipeline-rank)"),
      llvm::cl::init(0)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("microbatches per step (slapo-microbatch accumulates "
                     "their gradients)"),
      llvm::cl::init(1)};
  ListOption<std::string> primitives{
      *this, "primitives",
      llvm::cl::desc("the passes of the schedule's primitives, in schedule "
                     "order, as in a pipeline: "
                     "slapo-shard{axis=1 modules=a,b param=weight},...; "
                     "slapo-propagate-sharding follows those of shard, sync "
                     "and fork_rng")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32, or bf16 (slapo-mixed-precision)"),
      llvm::cl::init("fp32")};

  // slapo-optimizer's options, the schedule's train() options.
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<ExactDouble> lr{*this, "lr", llvm::cl::desc("peak learning rate"),
                         llvm::cl::init(1e-3)};
  Option<ExactDouble> beta1{*this, "beta1", llvm::cl::desc("AdamW's beta1"),
                            llvm::cl::init(0.9)};
  Option<ExactDouble> beta2{*this, "beta2", llvm::cl::desc("AdamW's beta2"),
                            llvm::cl::init(0.999)};
  Option<ExactDouble> eps{*this, "eps", llvm::cl::desc("AdamW's epsilon"),
                          llvm::cl::init(1e-8)};
  Option<ExactDouble> weightDecay{
      *this, "weight-decay", llvm::cl::desc("weight decay"), llvm::cl::init(0)};
  Option<ExactDouble> momentum{
      *this, "momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(0)};
  Option<ExactDouble> gradClip{
      *this, "grad-clip",
      llvm::cl::desc("largest global gradient norm; 0 does not clip"),
      llvm::cl::init(0)};
  Option<std::string> lrSchedule{*this, "lr-schedule",
                                 llvm::cl::desc("constant or warmup_cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("warmup steps of warmup_cosine"),
                              llvm::cl::init(0)};

  // slapo-checkpoint's options: checkpoint() and train(memory_budget=).
  ListOption<ModelName> checkpoint{
      *this, "checkpoint",
      llvm::cl::desc("modules whose forward the backward recomputes")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("the planned arena's limit in bytes; 0: none"),
      llvm::cl::init(0)};
  ListOption<ModelName> checkpointCandidates{
      *this, "checkpoint-candidates",
      llvm::cl::desc("modules the memory budget may checkpoint")};

  // slapo-fuse-elementwise's: train(fusion=) and fuse().
  Option<std::string> fusion{
      *this, "fusion",
      llvm::cl::desc("none, or auto: every module's elementwise chains "
                     "fused (slapo-fuse-elementwise)"),
      llvm::cl::init("auto")};
  ListOption<ModelName> fuse{
      *this, "fuse",
      llvm::cl::desc("modules whose elementwise chains are fused")};
  ListOption<std::string> fuseKinds{
      *this, "fuse-kinds",
      llvm::cl::desc("the passes of fuse() with a named kind, in schedule "
                     "order: slapo-fuse-elementwise{kind=bias_gelu "
                     "modules=a,b},...; before the fusion of fuse and "
                     "fusion")};
};

/// Which passes of the pipeline buildTrainingPipeline adds: with pipeline
/// stages, every stage's program starts from the same module up to the
/// microbatches (Shared), then its own passes (Stage) run on a copy of it.
enum class PipelinePart { Whole, Shared, Stage };

/// Adds the passes of `options` (those of `part`) to `pm` (anchored on
/// builtin.module); fails, saying why on `errors`, where a primitive is not
/// a pass with valid options.
mlir::LogicalResult buildTrainingPipeline(
    mlir::OpPassManager &pm, const TrainingPipelineOptions &options,
    llvm::raw_ostream &errors, PipelinePart part = PipelinePart::Whole);

/// The name of a primitive's schedule location where it is fused into the
/// locations of the ops the primitive transforms: its pass as that pass
/// prints itself (`slapo-sync{axis=-1 mode=bwd_post modules=... op=...}`,
/// from `primitive` in any option order), so that the pass finds its own
/// line among those of every primitive on the ops (getPrimitiveLocation).
/// Empty where `primitive` is not one pass.
std::string getPrimitiveLocationName(llvm::StringRef primitive);

/// The schedule location of `pass`'s primitive fused into `op`'s location,
/// or `op`'s location where it holds none (IR not planned from a schedule,
/// as in slapo-opt's tests): where `pass`'s errors about `op` point.
mlir::Location getPrimitiveLocation(mlir::Operation *op, mlir::Pass &pass);

/// `op`'s location without the primitives' schedule locations fused into
/// it: the model's source, where a note about the op itself points.
mlir::Location getModelLocation(mlir::Operation *op);

/// Registers `slapo-training`, built by buildTrainingPipeline.
void registerTrainingPipeline();

} // namespace slapo

#endif // SLAPO_TRANSFORMS_PIPELINE_H
