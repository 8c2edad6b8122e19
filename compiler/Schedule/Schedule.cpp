//===- Schedule.cpp - what a schedule declares and asks for ---------------===//
#include "slapo/Schedule/Schedule.h"

#include "slapo/Schedule/Signature.h"
#include "slapo/Schedule/Suggestions.h"
#include "slapo/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace slapo::schedule {
namespace {

//===----------------------------------------------------------------------===//
// Signatures of the declarations and primitives.
//===----------------------------------------------------------------------===//

/// No mesh axis is larger than this: it keeps the world size far from
/// overflow and catches typos like tp=20000000.
constexpr double kMaxDegree = 65536;

const Parameter meshParameters[] = {
    Parameter::integer("dp").atLeast(1).atMost(kMaxDegree),
    Parameter::integer("tp").atLeast(1).atMost(kMaxDegree),
    Parameter::integer("pp").atLeast(1).atMost(kMaxDegree),
};
const Signature meshSignature{"mesh", meshParameters};

const Parameter inputParameters[] = {
    Parameter::string("name").asPositional().asRequired(),
    Parameter::typedShape("type").asPositional().asRequired(),
};
const Signature inputSignature{"input", inputParameters};

const llvm::StringRef optimizers[] = {"sgd", "adamw"};
const llvm::StringRef precisions[] = {"fp32", "bf16"};
const llvm::StringRef losses[] = {"forward", "cross_entropy"};
const llvm::StringRef lrSchedules[] = {"constant", "warmup_cosine"};
const llvm::StringRef fusions[] = {"none", "auto"};
const Parameter trainParameters[] = {
    Parameter::choice("optimizer", optimizers),
    Parameter::number("lr").above(0),
    Parameter::numberPair("betas").atLeast(0).below(1),
    Parameter::number("eps").above(0),
    Parameter::number("weight_decay").atLeast(0),
    Parameter::number("momentum").atLeast(0).below(1),
    Parameter::number("grad_clip").atLeast(0),
    Parameter::choice("precision", precisions),
    Parameter::integer("microbatches").atLeast(1),
    Parameter::integer("seed").atLeast(0),
    Parameter::choice("loss", losses),
    Parameter::choice("lr_schedule", lrSchedules),
    Parameter::integer("warmup_steps").atLeast(0),
    Parameter::string("memory_budget"),
    Parameter::choice("fusion", fusions),
};
const Signature trainSignature{"train", trainParameters};

/// train() options that mean something only for one value of another.
struct OptionCondition {
  llvm::StringLiteral option, on;
  std::string TrainOptions::*onField;
  llvm::StringLiteral value;
};
const OptionCondition trainConditions[] = {
    {"betas", "optimizer", &TrainOptions::optimizer, "adamw"},
    {"eps", "optimizer", &TrainOptions::optimizer, "adamw"},
    {"momentum", "optimizer", &TrainOptions::optimizer, "sgd"},
    {"warmup_steps", "lr_schedule", &TrainOptions::lrSchedule, "warmup_cosine"},
};

const Parameter shardParameters[] = {
    Parameter::string("param").asPositional().asRequired(),
    Parameter::integer("axis").asPositional().asRequired(),
};
const llvm::StringRef syncModes[] = {"fwd_pre", "fwd_post", "bwd_post"};
const llvm::StringRef syncOps[] = {"all_reduce", "all_gather", "reduce_scatter",
                                   "scatter"};
const Parameter syncParameters[] = {
    Parameter::choice("mode", syncModes).asPositional().asRequired(),
    Parameter::choice("op", syncOps).asPositional().asRequired(),
    Parameter::integer("axis"),
};
// The fusion kinds and replacement kernels are those their passes implement:
// the registries are the language's lists. Their names are constant data, so
// reading them while this file's statics are initialised is safe.
const Parameter fuseParameters[] = {
    Parameter::choice("kind", getFuseKinds()).asPositional(),
};
const Parameter replaceParameters[] = {
    Parameter::choice("kernel", getReplaceKernels())
        .asPositional()
        .asRequired(),
};

const Parameter checkpointParameters[] = {
    Parameter::number("ratio").above(0).atMost(1),
};

struct PrimitiveInfo {
  PrimitiveKind kind;
  Signature signature;
};
const PrimitiveInfo primitiveInfos[] = {
    {PrimitiveKind::Shard, {"shard", shardParameters}},
    {PrimitiveKind::Sync, {"sync", syncParameters}},
    {PrimitiveKind::Checkpoint, {"checkpoint", checkpointParameters}},
    {PrimitiveKind::Fuse, {"fuse", fuseParameters}},
    {PrimitiveKind::Replace, {"replace", replaceParameters}},
    {PrimitiveKind::Decompose, {"decompose", {}}},
    {PrimitiveKind::ForkRng, {"fork_rng", {}}},
    {PrimitiveKind::CutPipelineStage, {"cut_pipeline_stage", {}}},
};

const llvm::StringLiteral declarationNames[] = {"mesh", "input", "train"};

bool isIdentifier(llvm::StringRef name) {
  return !name.empty() && (llvm::isAlpha(name[0]) || name[0] == '_') &&
         llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

//===----------------------------------------------------------------------===//
// Building the schedule.
//===----------------------------------------------------------------------===//

class ScheduleBuilder {
public:
  ScheduleBuilder(llvm::SMLoc fileStart, DiagnosticReporter &reporter)
      : reporter(reporter) {
    schedule.fileStart = fileStart;
  }

  Schedule build(llvm::ArrayRef<ast::Statement> statements);

private:
  void buildMesh(const ast::Statement &statement);
  void buildInput(const ast::Statement &statement);
  void buildTrain(const ast::Statement &statement);
  void buildPrimitive(const ast::Statement &statement);
  void reportUnknownDeclaration(const ast::Call &call);
  /// Reports a second mesh() or train(); true if `previous` is unset.
  bool checkFirst(const ast::Call &call, llvm::SMLoc previous);

  Schedule schedule;
  DiagnosticReporter &reporter;
};

} // namespace

llvm::StringRef getPrimitiveName(PrimitiveKind kind) {
  for (const PrimitiveInfo &info : primitiveInfos)
    if (info.kind == kind)
      return info.signature.name;
  llvm_unreachable("every primitive has a signature");
}

const PrimitiveArgument *Primitive::getArgument(llvm::StringRef name) const {
  auto it = llvm::find_if(arguments, [&](const PrimitiveArgument &argument) {
    return argument.name == name;
  });
  return it == arguments.end() ? nullptr : &*it;
}

Schedule ScheduleBuilder::build(llvm::ArrayRef<ast::Statement> statements) {
  for (const ast::Statement &statement : statements) {
    if (reporter.stopped())
      break;
    if (statement.kind == ast::Statement::Kind::Primitive) {
      buildPrimitive(statement);
      continue;
    }
    llvm::StringRef name = statement.call.name;
    if (name == "mesh")
      buildMesh(statement);
    else if (name == "input")
      buildInput(statement);
    else if (name == "train")
      buildTrain(statement);
    else
      reportUnknownDeclaration(statement.call);
  }
  return std::move(schedule);
}

void ScheduleBuilder::reportUnknownDeclaration(const ast::Call &call) {
  for (const PrimitiveInfo &info : primitiveInfos)
    if (info.signature.name == call.name) {
      reporter.error(call.nameLoc, "'" + call.name +
                                       "' is a primitive: write sch[\"module "
                                       "path\"]." +
                                       call.name + "(...)");
      return;
    }
  llvm::SmallVector<llvm::StringRef> names(std::begin(declarationNames),
                                           std::end(declarationNames));
  reporter.error(call.nameLoc,
                 describeUnknownName("unknown declaration '" + call.name + "'",
                                     call.name, names, Spelling::Name) +
                     "; primitives are written "
                     "sch[\"module path\"].primitive(...)");
}

bool ScheduleBuilder::checkFirst(const ast::Call &call, llvm::SMLoc previous) {
  if (!previous.isValid())
    return true;
  reporter.error(call.nameLoc, "duplicate " + call.name + "() declaration",
                 {{previous, "previous declaration here"}});
  return false;
}

void ScheduleBuilder::buildMesh(const ast::Statement &statement) {
  auto arguments = bindArguments(statement.call, meshSignature, reporter);
  if (!checkFirst(statement.call, schedule.mesh.loc) || !arguments)
    return;
  Mesh &mesh = schedule.mesh;
  mesh.loc = statement.call.nameLoc;
  mesh.dp = arguments->getInteger("dp", mesh.dp);
  mesh.tp = arguments->getInteger("tp", mesh.tp);
  mesh.pp = arguments->getInteger("pp", mesh.pp);
  mesh.ppLoc = arguments->getLoc("pp", mesh.loc);
}

void ScheduleBuilder::buildInput(const ast::Statement &statement) {
  unsigned errorsBefore = reporter.getNumErrors();
  auto arguments = bindArguments(statement.call, inputSignature, reporter);
  if (arguments) {
    const ast::Value &name = arguments->lookup("name")->value;
    const ast::Value &type = arguments->lookup("type")->value;
    InputDeclaration input;
    input.loc = statement.call.nameLoc;
    input.spec.name = name.string;
    input.spec.dtype = type.string;
    bool ok = true;
    if (!isIdentifier(name.string)) {
      reporter.error(name.getLoc(), "input name \"" + name.string +
                                        "\" is not a Python identifier");
      ok = false;
    }
    auto previous =
        llvm::find_if(schedule.inputs, [&](const InputDeclaration &other) {
          return other.spec.name == name.string;
        });
    if (previous != schedule.inputs.end()) {
      reporter.error(name.getLoc(),
                     "input \"" + name.string + "\" is declared twice",
                     {{previous->loc, "previous declaration here"}});
      ok = false;
    }
    if (!llvm::is_contained(dtypeNames(), type.string)) {
      reporter.error(type.getLoc(),
                     describeUnknownName("unknown dtype '" + type.string + "'",
                                         type.string, dtypeNames(),
                                         Spelling::Name));
      ok = false;
    }
    for (const ast::Value &dimension : type.elements) {
      if (dimension.kind != ast::Value::Kind::Integer ||
          dimension.integer <= 0) {
        reporter.error(dimension.getLoc(), "dimensions of input \"" +
                                               name.string +
                                               "\" are positive integers");
        ok = false;
        continue;
      }
      input.spec.shape.push_back(dimension.integer);
    }
    if (ok)
      schedule.inputs.push_back(std::move(input));
  }
  if (reporter.getNumErrors() != errorsBefore || reporter.stopped())
    schedule.inputsValid = false;
}

void ScheduleBuilder::buildTrain(const ast::Statement &statement) {
  auto arguments = bindArguments(statement.call, trainSignature, reporter);
  if (!checkFirst(statement.call, schedule.train.loc) || !arguments)
    return;
  TrainOptions options;
  options.loc = statement.call.nameLoc;
  options.optimizer = arguments->getString("optimizer", options.optimizer);
  options.lr = arguments->getNumber("lr", options.lr);
  std::tie(options.beta1, options.beta2) =
      arguments->getNumberPair("betas", {options.beta1, options.beta2});
  options.eps = arguments->getNumber("eps", options.eps);
  options.weightDecay =
      arguments->getNumber("weight_decay", options.weightDecay);
  options.momentum = arguments->getNumber("momentum", options.momentum);
  options.gradClip = arguments->getNumber("grad_clip", options.gradClip);
  options.precision = arguments->getString("precision", options.precision);
  options.microbatches =
      arguments->getInteger("microbatches", options.microbatches);
  options.microbatchesLoc = arguments->getLoc("microbatches", options.loc);
  options.seed = arguments->getInteger("seed", options.seed);
  options.loss = arguments->getString("loss", options.loss);
  options.lossLoc = arguments->getLoc("loss", options.loc);
  options.lrSchedule = arguments->getString("lr_schedule", options.lrSchedule);
  options.warmupSteps =
      arguments->getInteger("warmup_steps", options.warmupSteps);
  options.fusion = arguments->getString("fusion", options.fusion);

  bool ok = true;
  if (const ast::Argument *budget = arguments->lookup("memory_budget")) {
    options.memoryBudgetLoc = budget->getLoc();
    std::optional<int64_t> bytes = parseByteSize(budget->value.string);
    if (bytes && *bytes > 0) {
      options.memoryBudget = *bytes;
    } else {
      reporter.error(budget->getLoc(),
                     "memory_budget \"" + budget->value.string +
                         "\" is not a size: write a positive number and a "
                         "unit, like \"12GiB\", \"512MiB\" or \"64KiB\"");
      ok = false;
    }
  }
  for (const OptionCondition &condition : trainConditions) {
    const ast::Argument *option = arguments->lookup(condition.option);
    const std::string &actual = options.*condition.onField;
    if (option && actual != condition.value) {
      reporter.error(option->getLoc(),
                     condition.option + " applies only with " + condition.on +
                         "=\"" + condition.value + "\", but " + condition.on +
                         " is \"" + actual + "\"");
      ok = false;
    }
  }
  if (ok)
    schedule.train = std::move(options);
}

void ScheduleBuilder::buildPrimitive(const ast::Statement &statement) {
  const ast::Call &call = statement.call;
  const PrimitiveInfo *info =
      llvm::find_if(primitiveInfos, [&](const PrimitiveInfo &candidate) {
        return candidate.signature.name == call.name;
      });
  if (info == std::end(primitiveInfos)) {
    llvm::SmallVector<llvm::StringRef> names;
    for (const PrimitiveInfo &candidate : primitiveInfos)
      names.push_back(candidate.signature.name);
    reporter.error(call.nameLoc,
                   describeUnknownName("unknown primitive '" + call.name + "'",
                                       call.name, names, Spelling::Name));
    return;
  }
  auto arguments = bindArguments(call, info->signature, reporter);
  if (!arguments)
    return;

  Primitive primitive{
      info->kind, call.nameLoc, *statement.pattern, statement.selector, {}};
  for (const Parameter &parameter : info->signature.parameters) {
    const ast::Argument *argument = arguments->lookup(parameter.name);
    if (!argument)
      continue;
    const ast::Value &value = argument->value;
    primitive.arguments.push_back(
        {parameter.name.str(),
         value.kind == ast::Value::Kind::Integer ? std::to_string(value.integer)
                                                 : value.string,
         value.integer, value.number, argument->getLoc()});
  }

  if (info->kind == PrimitiveKind::Sync) {
    llvm::StringRef op = primitive.getArgument("op")->value;
    const PrimitiveArgument *axis = primitive.getArgument("axis");
    if (op == "all_reduce" && axis) {
      reporter.error(axis->loc, "all_reduce takes no axis: it sums whole "
                                "tensors");
      return;
    }
    if (op != "all_reduce" && !axis) {
      reporter.error(call.nameLoc,
                     op + " needs the axis it splits or joins: sync(mode, \"" +
                         op + "\", axis=N)");
      return;
    }
  }
  schedule.primitives.push_back(std::move(primitive));
}

std::optional<int64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef unit = text.ltrim("0123456789.");
  llvm::StringRef digits = text.drop_back(unit.size());
  double number = 0;
  if (digits.empty() || digits.getAsDouble(number))
    return std::nullopt;
  const std::pair<llvm::StringRef, double> units[] = {
      {"B", 1},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12}};
  for (const auto &[name, scale] : units)
    if (unit.trim() == name && number * scale < 9e18)
      return static_cast<int64_t>(number * scale);
  return std::nullopt;
}

Schedule buildSchedule(llvm::ArrayRef<ast::Statement> statements,
                       llvm::SMLoc fileStart, DiagnosticReporter &reporter) {
  return ScheduleBuilder(fileStart, reporter).build(statements);
}

//===----------------------------------------------------------------------===//
// Inputs from the schedule and the command line.
//===----------------------------------------------------------------------===//

static std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ",") +
         "]";
}

std::optional<std::vector<InputSpec>>
resolveInputs(const Schedule &schedule,
              llvm::ArrayRef<InputSpec> commandLineInputs,
              DiagnosticReporter &reporter) {
  std::vector<InputSpec> declared;
  for (const InputDeclaration &input : schedule.inputs)
    declared.push_back(input.spec);
  if (commandLineInputs.empty())
    return declared;
  if (declared.empty())
    return commandLineInputs.vec();

  bool ok = true;
  for (size_t i = 0; i < std::max(declared.size(), commandLineInputs.size());
       ++i) {
    if (i >= commandLineInputs.size()) {
      reporter.error(schedule.inputs[i].loc,
                     "input \"" + declared[i].name +
                         "\" is not given by --input, which lists " +
                         llvm::Twine(commandLineInputs.size()) +
                         " inputs; --input must repeat the schedule's inputs "
                         "exactly, or be left out");
      ok = false;
      continue;
    }
    const InputSpec &given = commandLineInputs[i];
    if (i >= declared.size()) {
      reporter.error(schedule.inputs.back().loc,
                     "--input " + given.str() +
                         " is not declared by the schedule, which declares " +
                         llvm::Twine(declared.size()) +
                         " inputs; --input must repeat the schedule's inputs "
                         "exactly, or be left out");
      ok = false;
      continue;
    }
    const InputSpec &expected = declared[i];
    std::string disagreement;
    if (given.name != expected.name)
      disagreement = "input " + std::to_string(i + 1) + " is \"" +
                     expected.name + "\" here but \"" + given.name +
                     "\" in --input";
    else if (given.dtype != expected.dtype)
      disagreement = "input \"" + expected.name + "\" is " + expected.dtype +
                     " here but " + given.dtype + " in --input";
    else if (given.shape != expected.shape)
      disagreement = "input \"" + expected.name + "\" has shape " +
                     formatShape(expected.shape) + " here but " +
                     formatShape(given.shape) + " in --input";
    if (!disagreement.empty()) {
      reporter.error(schedule.inputs[i].loc, disagreement);
      ok = false;
    }
  }
  if (!ok)
    return std::nullopt;
  return declared;
}

std::optional<std::vector<InputSpec>>
splitBatchIntoMicrobatches(const Schedule &schedule,
                           llvm::ArrayRef<InputSpec> inputs,
                           DiagnosticReporter &reporter) {
  std::vector<InputSpec> local(inputs.begin(), inputs.end());
  int64_t dp = schedule.mesh.dp, microbatches = schedule.train.microbatches;
  if (dp * microbatches == 1)
    return local;
  std::string shares = dp == 1 ? "" : "dp=" + std::to_string(dp);
  if (microbatches != 1)
    shares += (shares.empty() ? "" : " x ") + std::string("microbatches=") +
              std::to_string(microbatches);
  bool ok = true;
  for (auto [i, input] : llvm::enumerate(local)) {
    // Inputs from --input have no declaration to point at; the mesh has.
    llvm::SMLoc loc =
        i < schedule.inputs.size() ? schedule.inputs[i].loc : schedule.mesh.loc;
    if (input.shape.empty() || input.shape[0] % (dp * microbatches) != 0) {
      reporter.error(loc, "input \"" + input.name + "\" of shape " +
                              formatShape(input.shape) +
                              " cannot be split over " + shares + ": each " +
                              (microbatches == 1 ? "rank" : "microbatch") +
                              " gets an equal share of dim 0 (the batch)");
      ok = false;
      continue;
    }
    input.shape[0] /= dp * microbatches;
    input.batchShares = dp * microbatches;
    input.batchSplit = shares;
  }
  if (!ok)
    return std::nullopt;
  return local;
}

} // namespace slapo::schedule
