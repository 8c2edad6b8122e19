//===- Plan.cpp - a schedule applied to a model ---------------------------===//
#include "slapo/Schedule/Plan.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Schedule/MLIRDiagnostics.h"
#include "slapo/Schedule/Signature.h"
#include "slapo/Schedule/Suggestions.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <cmath>
#include <map>

namespace slapo::schedule {

//===----------------------------------------------------------------------===//
// ModuleIndex
//===----------------------------------------------------------------------===//

/// Calls `callback` with `path` and each of its prefixes, longest first.
static void forEachPrefix(llvm::StringRef path,
                          llvm::function_ref<void(llvm::StringRef)> callback) {
  while (!path.empty()) {
    callback(path);
    size_t dot = path.rfind('.');
    if (dot == llvm::StringRef::npos)
      break;
    path = path.take_front(dot);
  }
}

static bool isDecimal(llvm::StringRef text) {
  return !text.empty() && llvm::all_of(text, llvm::isDigit);
}

bool ModuleIndex::naturalLess(llvm::StringRef a, llvm::StringRef b) {
  while (!a.empty() && !b.empty()) {
    auto [aName, aRest] = a.split('.');
    auto [bName, bRest] = b.split('.');
    if (aName != bName) {
      // Compared by length first, numbers of any size order correctly.
      if (isDecimal(aName) && isDecimal(bName) && aName.size() != bName.size())
        return aName.size() < bName.size();
      return aName < bName;
    }
    a = aRest;
    b = bRest;
  }
  return a.size() < b.size();
}

ModuleIndex::ModuleIndex(mlir::ModuleOp module) {
  forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward) {
    auto functions = module.getOps<mlir::func::FuncOp>();
    if (!functions.empty())
      forward = *functions.begin();
  }
  llvm::StringSet<> collected;
  auto addModule = [&](llvm::StringRef path) {
    forEachPrefix(path,
                  [&](llvm::StringRef prefix) { collected.insert(prefix); });
  };
  for (ParamOp param : module.getOps<ParamOp>()) {
    llvm::SmallVector<llvm::StringRef> names = {param.getSymName()};
    if (auto aliases = param.getAliases())
      for (mlir::Attribute alias : *aliases)
        names.push_back(alias.cast<mlir::StringAttr>().getValue());
    for (llvm::StringRef name : names) {
      parameters[name] = param;
      size_t dot = name.rfind('.');
      if (dot != llvm::StringRef::npos)
        addModule(name.take_front(dot));
    }
  }
  if (forward)
    forward.walk([&](mlir::Operation *op) { addModule(getModulePath(op)); });
  for (const auto &entry : collected)
    paths.push_back(entry.getKey().str());
  llvm::sort(paths, naturalLess);
}

std::vector<std::string>
ModuleIndex::match(const SelectorPattern &selector) const {
  std::vector<std::string> matched;
  for (const std::string &path : paths)
    if (selector.matches(path))
      matched.push_back(path);
  return matched;
}

std::vector<std::string>
ModuleIndex::getParameterNames(llvm::StringRef path) const {
  std::vector<std::string> names;
  for (const auto &entry : parameters) {
    llvm::StringRef name = entry.getKey();
    if (name.consume_front(path) && name.consume_front(".") &&
        !name.contains('.'))
      names.push_back(name.str());
  }
  llvm::sort(names, naturalLess);
  return names;
}

//===----------------------------------------------------------------------===//
// PipelineEntry
//===----------------------------------------------------------------------===//

std::string PipelineEntry::getPassName() const {
  // fuse() is elementwise fusion; a named kind is its option (kind=bias_gelu),
  // the pattern its groups must match.
  if (kind == PrimitiveKind::Fuse)
    return "slapo-fuse-elementwise";
  std::string name = getPrimitiveName(kind).str();
  std::replace(name.begin(), name.end(), '_', '-');
  return "slapo-" + name;
}

std::string PipelineEntry::getPass() const {
  std::string pass = getPassName();
  llvm::raw_string_ostream os(pass);
  printOptions(os);
  return os.str();
}

void PipelineEntry::printOptions(llvm::raw_ostream &os) const {
  os << "{modules=";
  llvm::interleave(
      modules, os, [&](const std::string &path) { printModelName(os, path); },
      ",");
  for (const auto &[name, value] : options) {
    os << " " << name << "=";
    printModelName(os, value);
  }
  os << "}";
}

//===----------------------------------------------------------------------===//
// Planning
//===----------------------------------------------------------------------===//

namespace {

/// `name` in single quotes (or `quote`), escaped as printOptionValue
/// escapes: a model's names, and strings of the schedule, may hold any byte
/// (CR and NUL included), and a message stays one readable line.
std::string quoteName(llvm::StringRef name, char quote = '\'') {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << quote;
  llvm::printEscapedString(name, os);
  os << quote;
  return os.str();
}

std::string quoteList(llvm::ArrayRef<std::string> names) {
  return llvm::join(
      llvm::map_range(names,
                      [](const std::string &name) { return quoteName(name); }),
      ", ");
}

class Planner {
public:
  Planner(const Schedule &schedule, mlir::ModuleOp module,
          DiagnosticReporter &reporter)
      : schedule(schedule), index(module), reporter(reporter) {}

  std::optional<Plan> plan();

private:
  /// The modules `primitive` selects; reports a selector that matches
  /// nothing, or one of whose `{...}` elements matches nothing.
  std::optional<std::vector<std::string>>
  resolveSelector(const Primitive &primitive);
  bool planShard(const Primitive &primitive, PipelineEntry &entry);
  bool checkDecompose(const PipelineEntry &entry);
  /// Keeps the first ceil(ratio * N) of the N modules checkpoint() selects.
  void applyCheckpointRatio(const Primitive &primitive, PipelineEntry &entry);
  /// Why `module` cannot be checkpointed, or "".
  std::string findCheckpointProblem(llvm::StringRef module);
  bool checkCheckpoint(const PipelineEntry &entry);
  void planMemoryBudget();
  void checkPipelineCuts();
  void planMicrobatches();
  void checkLoss();

  struct ShardRecord {
    int64_t axis;
    llvm::SMLoc loc;
  };

  const Schedule &schedule;
  ModuleIndex index;
  DiagnosticReporter &reporter;
  Plan result;
  /// Sharded parameter symbol -> the first shard of it.
  llvm::StringMap<ShardRecord> shards;
};

} // namespace

std::optional<std::vector<std::string>>
Planner::resolveSelector(const Primitive &primitive) {
  const ast::Value &selector = primitive.selectorString;
  std::vector<std::string> modules = index.match(primitive.selector);
  if (modules.empty()) {
    std::string message = "selector " + quoteName(selector.string, '"') +
                          " matches no module of the model";
    std::vector<std::string> nearest =
        findNearestPaths(selector.string, index.getPaths(), 3);
    if (!nearest.empty())
      message += "; closest: " + quoteList(nearest);
    reporter.error(selector.getLoc(), message);
    return std::nullopt;
  }
  if (auto unmatched =
          primitive.selector.findUnmatchedElement(index.getPaths())) {
    reporter.error(selector.getStringCharLoc(unmatched->offset),
                   "element " + quoteName(unmatched->element) + " of " +
                       quoteName(unmatched->braces) + " in selector " +
                       quoteName(selector.string, '"') +
                       " matches no module of the model");
    return std::nullopt;
  }
  return modules;
}

bool Planner::planShard(const Primitive &primitive, PipelineEntry &entry) {
  const PrimitiveArgument &param = *primitive.getArgument("param");
  const PrimitiveArgument &axis = *primitive.getArgument("axis");

  std::vector<std::string> missing;
  // (name on the module, its symbol): tied parameters share one symbol.
  std::vector<std::pair<std::string, ParamOp>> params;
  for (const std::string &module : entry.modules) {
    std::string name = module + "." + param.value;
    if (ParamOp op = index.lookupParameter(name))
      params.emplace_back(name, op);
    else
      missing.push_back(module);
  }
  if (!missing.empty()) {
    std::vector<std::string> present = index.getParameterNames(missing[0]);
    std::string message = "module " + quoteName(missing[0]);
    if (missing.size() > 1)
      message += " (and " + std::to_string(missing.size() - 1) +
                 " more module" + (missing.size() == 2 ? "" : "s") +
                 " the selector matches)";
    message += " has no parameter or buffer " + quoteName(param.value);
    message +=
        present.empty() ? "; it has none" : "; it has " + quoteList(present);
    reporter.error(param.loc, message);
    return false;
  }

  std::optional<int64_t> normalizedAxis;
  for (auto &[requested, op] : params) {
    mlir::RankedTensorType type = op.getTensorType();
    int64_t rank = type.getRank();
    std::string symbol = op.getSymName().str();
    // How messages name it: 'lm_head.weight' (tied to 'transformer.wte...').
    std::string name = quoteName(requested);
    if (requested != symbol)
      name += " (tied to " + quoteName(symbol) + ")";
    if (axis.integer < -rank || axis.integer >= rank) {
      reporter.error(axis.loc, "axis " + llvm::Twine(axis.integer) +
                                   " is out of range for " + name + " (" +
                                   mlir::debugString(type) + ", rank " +
                                   llvm::Twine(rank) + "); valid axes: " +
                                   (rank == 0 ? std::string("none")
                                              : std::to_string(-rank) + " to " +
                                                    std::to_string(rank - 1)));
      return false;
    }
    int64_t dim = axis.integer < 0 ? axis.integer + rank : axis.integer;
    if (normalizedAxis && *normalizedAxis != dim) {
      reporter.error(axis.loc, "axis " + llvm::Twine(axis.integer) +
                                   " names different dimensions of the "
                                   "matched parameters; give it as a "
                                   "non-negative number");
      return false;
    }
    normalizedAxis = dim;
    int64_t size = type.getDimSize(dim);
    if (size % schedule.mesh.tp != 0) {
      reporter.error(axis.loc, "dimension " + llvm::Twine(dim) + " of " + name +
                                   " (" + mlir::debugString(type) +
                                   ") has size " + llvm::Twine(size) +
                                   ", which is not divisible by tp=" +
                                   llvm::Twine(schedule.mesh.tp));
      return false;
    }
    auto [previous, inserted] =
        shards.try_emplace(symbol, ShardRecord{dim, primitive.loc});
    if (!inserted && previous->second.axis != dim) {
      reporter.error(axis.loc,
                     name + " is sharded on axis " +
                         llvm::Twine(previous->second.axis) +
                         " already; a parameter is split along one axis",
                     {{previous->second.loc,
                       "sharded on axis " +
                           std::to_string(previous->second.axis) + " here"}});
      return false;
    }
    entry.parameterSymbols.push_back(symbol);
  }
  entry.options = {{"param", param.value},
                   {"axis", std::to_string(*normalizedAxis)}};
  return true;
}

/// decompose() splits the linear layers with a bias in the module and its
/// submodules (as slapo-decompose does): a module that has none is reported
/// at the primitive.
bool Planner::checkDecompose(const PipelineEntry &entry) {
  mlir::func::FuncOp forward = index.getForward();
  for (const std::string &module : entry.modules) {
    bool decomposable = false;
    if (forward)
      forward.walk([&](LinearOp linear) {
        decomposable |= linear.getBias() && isInModule(linear, module);
      });
    if (!decomposable) {
      reporter.error(entry.loc, "decompose(): module " + quoteName(module) +
                                    " computes no linear layer with a bias "
                                    "(nn.Linear, Conv1D)");
      return false;
    }
  }
  return true;
}

void Planner::applyCheckpointRatio(const Primitive &primitive,
                                   PipelineEntry &entry) {
  if (const PrimitiveArgument *ratio = primitive.getArgument("ratio"))
    entry.modules.resize(static_cast<size_t>(
        std::ceil(ratio->number * static_cast<double>(entry.modules.size()))));
}

std::string Planner::findCheckpointProblem(llvm::StringRef module) {
  mlir::func::FuncOp forward = index.getForward();
  if (!forward || forward.getBody().empty())
    return "";
  bool computes = false;
  for (mlir::Operation &op : forward.getBody().front().without_terminator())
    computes |=
        !llvm::isa<GetParamOp, ConstantOp>(op) && isInModule(&op, module);
  if (!computes)
    return "module " + quoteName(module) +
           " computes nothing in the forward: there is nothing to recompute";
  for (mlir::Value result :
       forward.getBody().front().getTerminator()->getOperands())
    if (mlir::Operation *def = result.getDefiningOp();
        def && isInModule(def, module))
      return "module " + quoteName(module) +
             " computes the forward's result (the loss): its backward "
             "follows its forward at once, so checkpointing it frees nothing";
  return "";
}

/// checkpoint() of a module that computes nothing or computes the loss is
/// reported at the primitive, as slapo-checkpoint would report it.
bool Planner::checkCheckpoint(const PipelineEntry &entry) {
  for (const std::string &module : entry.modules)
    if (std::string problem = findCheckpointProblem(module); !problem.empty()) {
      reporter.error(entry.loc, "checkpoint(): " + problem);
      return false;
    }
  return true;
}

void Planner::planMicrobatches() {
  result.microbatches = schedule.train.microbatches;
  result.microbatchesLoc = schedule.train.microbatchesLoc;
}

/// The candidates of a memory budget: the outermost modules whose name is
/// a number (h.3, layer.11: the blocks of a module list), in model order.
void Planner::planMemoryBudget() {
  if (schedule.train.memoryBudget == 0)
    return;
  result.memoryBudgetLoc = schedule.train.memoryBudgetLoc;
  for (const std::string &path : index.getPaths()) {
    llvm::StringRef name = llvm::StringRef(path).rsplit('.').second;
    if (!isDecimal(name.empty() ? path : name))
      continue;
    if (llvm::any_of(result.checkpointCandidates,
                     [&](const std::string &outer) {
                       return isWithinModule(path, outer);
                     }) ||
        !findCheckpointProblem(path).empty())
      continue;
    result.checkpointCandidates.push_back(path);
  }
  if (result.checkpointCandidates.empty())
    reporter.error(schedule.train.memoryBudgetLoc,
                   "memory_budget needs modules to checkpoint, the blocks "
                   "of a module list (numbered modules such as 'h.0'), and "
                   "the model has none; select modules with checkpoint()");
}

void Planner::checkPipelineCuts() {
  mlir::func::FuncOp forward = index.getForward();
  // The position of each module's last op in the forward's body: a cut
  // after a module ends its stage there.
  llvm::StringMap<size_t> lastOp;
  size_t numOps = 0;
  if (forward && !forward.getBody().empty())
    for (mlir::Operation &op : forward.getBody().front().without_terminator()) {
      forEachPrefix(getModulePath(&op),
                    [&](llvm::StringRef path) { lastOp[path] = numOps; });
      ++numOps;
    }

  struct Cut {
    std::string module;
    llvm::SMLoc loc;
  };
  std::map<size_t, Cut> cuts; // by position
  llvm::SMLoc firstCut;
  bool ok = true;
  for (const PipelineEntry &entry : result.pipeline) {
    if (entry.kind != PrimitiveKind::CutPipelineStage)
      continue;
    if (!firstCut.isValid())
      firstCut = entry.loc;
    for (const std::string &module : entry.modules) {
      auto position = lastOp.find(module);
      if (position == lastOp.end()) {
        reporter.error(entry.loc, "module " + quoteName(module) +
                                      " has no ops in the forward: there "
                                      "is nothing to cut after");
        ok = false;
        break;
      }
      if (position->second + 1 == numOps) {
        reporter.error(entry.loc, "a cut after " + quoteName(module) +
                                      " leaves the last pipeline stage "
                                      "empty: no op runs after it");
        ok = false;
        break;
      }
      auto [previous, inserted] =
          cuts.try_emplace(position->second, Cut{module, entry.loc});
      if (!inserted) {
        reporter.error(entry.loc,
                       previous->second.module == module
                           ? "module " + quoteName(module) + " is cut twice"
                           : "a cut after " + quoteName(module) +
                                 " is the same cut as the one after " +
                                 quoteName(previous->second.module) +
                                 ": both end with the same op",
                       {{previous->second.loc, "first cut here"}});
        ok = false;
        break;
      }
    }
  }
  if (!ok)
    return;
  int64_t stages = static_cast<int64_t>(cuts.size()) + 1;
  if (stages == schedule.mesh.pp)
    return;
  std::string message =
      std::to_string(cuts.size()) + " pipeline cut" +
      (cuts.size() == 1 ? "" : "s") + " make" + (cuts.size() == 1 ? "s" : "") +
      " " + std::to_string(stages) + " stage" + (stages == 1 ? "" : "s") +
      ", but the mesh has pp=" + std::to_string(schedule.mesh.pp);
  if (schedule.mesh.pp > stages)
    message += "; cut_pipeline_stage() after " +
               std::to_string(schedule.mesh.pp - 1) + " module" +
               (schedule.mesh.pp == 2 ? "" : "s") +
               " in all (each selected module is one cut)";
  if (schedule.mesh.loc.isValid())
    reporter.error(schedule.mesh.ppLoc, message);
  else
    reporter.error(firstCut.isValid() ? firstCut : schedule.fileStart,
                   message + " (no mesh() is declared)");
}

void Planner::checkLoss() {
  mlir::func::FuncOp forward = index.getForward();
  if (!forward)
    return;
  llvm::ArrayRef<mlir::Type> results = forward.getFunctionType().getResults();
  auto tensor = results.size() == 1
                    ? results[0].dyn_cast<mlir::RankedTensorType>()
                    : mlir::RankedTensorType();
  std::string returned =
      results.size() == 1
          ? mlir::debugString(results[0])
          : "(" +
                llvm::join(llvm::map_range(results,
                                           [](mlir::Type type) {
                                             return mlir::debugString(type);
                                           }),
                           ", ") +
                ")";
  const TrainOptions &train = schedule.train;
  llvm::SMLoc loc = train.loc.isValid() ? train.lossLoc : schedule.fileStart;
  if (train.loss == "forward" &&
      !(tensor && tensor.getRank() == 0 &&
        tensor.getElementType().isa<mlir::FloatType>()))
    reporter.error(loc, "the model's forward returns " + returned +
                            ", not a scalar loss; train(loss=\"cross_entropy\""
                            ") adds the loss to a forward that returns logits");
}

std::optional<Plan> Planner::plan() {
  unsigned errorsBefore = reporter.getNumErrors();
  for (const Primitive &primitive : schedule.primitives) {
    if (reporter.stopped())
      return std::nullopt;
    auto modules = resolveSelector(primitive);
    if (!modules)
      continue;
    PipelineEntry entry{
        primitive.kind, primitive.loc, std::move(*modules), {}, {}};
    if (primitive.kind == PrimitiveKind::Shard) {
      if (!planShard(primitive, entry))
        continue;
    } else if (primitive.kind == PrimitiveKind::Checkpoint) {
      applyCheckpointRatio(primitive, entry);
      if (!checkCheckpoint(entry))
        continue;
    } else {
      for (const PrimitiveArgument &argument : primitive.arguments)
        entry.options.emplace_back(argument.name, argument.value);
    }
    if (primitive.kind == PrimitiveKind::Decompose && !checkDecompose(entry))
      continue;
    result.pipeline.push_back(std::move(entry));
  }
  checkPipelineCuts();
  checkLoss();
  planMemoryBudget();
  planMicrobatches();
  if (reporter.getNumErrors() != errorsBefore || reporter.stopped())
    return std::nullopt;
  return std::move(result);
}

std::optional<Plan> planSchedule(const Schedule &schedule,
                                 mlir::ModuleOp module,
                                 DiagnosticReporter &reporter) {
  return Planner(schedule, module, reporter).plan();
}

//===----------------------------------------------------------------------===//
// Locations, printing, rejection
//===----------------------------------------------------------------------===//

void attachScheduleLocations(const Plan &plan, mlir::ModuleOp module,
                             const llvm::SourceMgr &sourceMgr) {
  mlir::MLIRContext *context = module.getContext();
  // Module path -> the schedule locations of the entries selecting it.
  llvm::StringMap<llvm::SmallVector<mlir::Location>> selected;
  llvm::StringMap<llvm::SmallVector<mlir::Location>> sharded;
  for (const PipelineEntry &entry : plan.pipeline) {
    mlir::Location loc = getScheduleLocation(sourceMgr, entry.loc, context);
    // Named after the primitive's pass, which finds its own line by it.
    loc = mlir::NameLoc::get(
        mlir::StringAttr::get(context,
                              getPrimitiveLocationName(entry.getPass())),
        loc);
    for (const std::string &path : entry.modules)
      selected[path].push_back(loc);
    for (const std::string &symbol : entry.parameterSymbols)
      sharded[symbol].push_back(loc);
  }
  auto fuse = [&](mlir::Operation *op,
                  llvm::ArrayRef<mlir::Location> scheduleLocs) {
    llvm::SmallVector<mlir::Location> locs(scheduleLocs.begin(),
                                           scheduleLocs.end());
    locs.push_back(op->getLoc());
    op->setLoc(mlir::FusedLoc::get(context, locs));
  };

  if (plan.memoryBudgetLoc.isValid())
    fuse(module, getScheduleLocation(sourceMgr, plan.memoryBudgetLoc, context));
  if (plan.microbatches != 1) {
    std::string pass =
        "slapo-microbatch{microbatches=" + std::to_string(plan.microbatches) +
        "}";
    mlir::Location loc = mlir::NameLoc::get(
        mlir::StringAttr::get(context, getPrimitiveLocationName(pass)),
        getScheduleLocation(sourceMgr, plan.microbatchesLoc, context));
    fuse(module, loc);
  }
  for (ParamOp param : module.getOps<ParamOp>()) {
    auto it = sharded.find(param.getSymName());
    if (it != sharded.end())
      fuse(param, it->second);
  }
  ModuleIndex index(module);
  if (!index.getForward())
    return;
  index.getForward().walk([&](mlir::Operation *op) {
    llvm::SmallVector<mlir::Location> scheduleLocs;
    forEachPrefix(getModulePath(op), [&](llvm::StringRef path) {
      auto it = selected.find(path);
      if (it != selected.end())
        scheduleLocs.append(it->second.begin(), it->second.end());
    });
    if (!scheduleLocs.empty())
      fuse(op, scheduleLocs);
  });
}

void setTrainingPipelineOptions(const Mesh &mesh, const TrainOptions &train,
                                const Plan *plan,
                                TrainingPipelineOptions &options) {
  options.dp = mesh.dp;
  options.tp = mesh.tp;
  options.pp = mesh.pp;
  options.microbatches = train.microbatches;
  options.precision = train.precision;
  options.optimizer = train.optimizer;
  options.lr = train.lr;
  options.beta1 = train.beta1;
  options.beta2 = train.beta2;
  options.eps = train.eps;
  options.weightDecay = train.weightDecay;
  options.momentum = train.momentum;
  options.gradClip = train.gradClip;
  options.lrSchedule = train.lrSchedule;
  options.warmupSteps = train.warmupSteps;
  options.memoryBudget = train.memoryBudget;
  options.fusion = train.fusion;
  if (!plan)
    return;
  std::vector<std::string> primitives, fuseKinds;
  std::vector<ModelName> checkpointed, fused;
  for (const PipelineEntry &entry : plan->pipeline) {
    // Checkpointing and fusion run on the training step, after the
    // optimizer.
    if (entry.kind == PrimitiveKind::Checkpoint) {
      checkpointed.insert(checkpointed.end(), entry.modules.begin(),
                          entry.modules.end());
      continue;
    }
    if (entry.kind == PrimitiveKind::Fuse) {
      if (entry.options.empty())
        fused.insert(fused.end(), entry.modules.begin(), entry.modules.end());
      else
        fuseKinds.push_back(entry.getPass());
      continue;
    }
    primitives.push_back(entry.getPass());
  }
  options.primitives = primitives;
  options.checkpoint = checkpointed;
  options.fuse = fused;
  options.fuseKinds = fuseKinds;
  options.checkpointCandidates = std::vector<ModelName>(
      plan->checkpointCandidates.begin(), plan->checkpointCandidates.end());
}

void printPlan(const Schedule &schedule, llvm::ArrayRef<InputSpec> inputs,
               const Plan &plan, const mlir::OpPassManager &pipeline,
               llvm::raw_ostream &os) {
  const Mesh &mesh = schedule.mesh;
  os << "// slapoc schedule plan\n";
  os << "mesh: dp=" << mesh.dp << " tp=" << mesh.tp << " pp=" << mesh.pp << " ("
     << mesh.getWorldSize()
     << (mesh.getWorldSize() == 1 ? " rank)\n" : " ranks)\n");
  for (const InputSpec &input : inputs)
    os << "input: " << input.str() << "\n";

  const TrainOptions &train = schedule.train;
  bool adamw = train.optimizer == "adamw";
  os << "train: optimizer=" << train.optimizer
     << " lr=" << formatNumber(train.lr);
  if (adamw)
    os << " betas=(" << formatNumber(train.beta1) << ","
       << formatNumber(train.beta2) << ") eps=" << formatNumber(train.eps);
  os << " weight_decay=" << formatNumber(train.weightDecay);
  if (!adamw)
    os << " momentum=" << formatNumber(train.momentum);
  os << " grad_clip=" << formatNumber(train.gradClip)
     << " precision=" << train.precision
     << " microbatches=" << train.microbatches << " seed=" << train.seed
     << " loss=" << train.loss << " fusion=" << train.fusion
     << " lr_schedule=" << train.lrSchedule;
  if (train.lrSchedule == "warmup_cosine")
    os << " warmup_steps=" << train.warmupSteps;
  if (train.memoryBudget)
    os << " memory_budget=" << train.memoryBudget << "B";
  os << "\n";

  os << "pipeline: ";
  pipeline.printAsTextualPipeline(os);
  os << "\n";
}

} // namespace slapo::schedule
