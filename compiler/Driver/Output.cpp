//===- Output.cpp - slapoc's output directory -----------------------------===//
#include "Output.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/Weights.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace slapo {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::make_error<llvm::StringError>(message,
                                             llvm::inconvertibleErrorCode());
}

llvm::Error fileError(const llvm::Twine &file, std::error_code code) {
  return error(file + ": " + code.message());
}

/// Writes `text` to `file`, failing with the file's name.
llvm::Error writeFile(const llvm::Twine &file, llvm::StringRef text) {
  std::error_code code;
  llvm::raw_fd_ostream os(file.str(), code);
  if (code)
    return fileError(file, code);
  os << text;
  os.close();
  if (os.has_error())
    return fileError(file, os.error());
  return llvm::Error::success();
}

std::string rankDir(int rank) { return "rank" + std::to_string(rank); }

} // namespace

llvm::Expected<StagedDirectory> StagedDirectory::create(llvm::StringRef target) {
  llvm::SmallString<256> absolute(target);
  if (std::error_code code = fs::make_absolute(absolute))
    return fileError(target, code);
  path::remove_dots(absolute, /*remove_dot_dot=*/true);
  while (absolute.size() > 1 && path::is_separator(absolute.back()))
    absolute.pop_back();
  if (fs::exists(absolute)) {
    if (!fs::is_directory(absolute))
      return error(target + ": exists and is not a directory");
    std::error_code code;
    bool empty = fs::directory_iterator(absolute, code) ==
                 fs::directory_iterator();
    llvm::SmallString<256> manifest(absolute);
    path::append(manifest, "manifest.json");
    if (!empty && !fs::exists(manifest))
      return error(target + ": exists and is not a slapoc output directory "
                            "(no manifest.json); refusing to replace it");
  }
  std::string staging =
      (absolute + ".partial-" + llvm::Twine(llvm::sys::Process::getProcessId()))
          .str();
  fs::remove_directories(staging);
  if (std::error_code code = fs::create_directories(staging))
    return fileError(staging, code);
  return StagedDirectory(absolute.str().str(), staging);
}

StagedDirectory::StagedDirectory(StagedDirectory &&other)
    : target(std::move(other.target)), staging(std::move(other.staging)) {
  other.staging.clear();
}

StagedDirectory::~StagedDirectory() {
  if (!staging.empty())
    fs::remove_directories(staging);
}

llvm::Error StagedDirectory::publish() {
  std::string previous;
  if (fs::exists(target)) {
    previous = (target + ".old-" +
                llvm::Twine(llvm::sys::Process::getProcessId()))
                   .str();
    if (std::error_code code = fs::rename(target, previous))
      return fileError(target, code);
  }
  if (std::error_code code = fs::rename(staging, target)) {
    if (!previous.empty())
      fs::rename(previous, target);
    return fileError(target, code);
  }
  staging.clear();
  if (!previous.empty())
    fs::remove_directories(previous);
  return llvm::Error::success();
}

llvm::Expected<std::string> writeRank(llvm::StringRef dir,
                                      mlir::ModuleOp planned,
                                      TorchScriptModel &model,
                                      const RankProgramInfo &info,
                                      const HostBuild &build) {
  llvm::SmallString<256> rank(dir);
  path::append(rank, rankDir(info.rank));
  if (std::error_code code = fs::create_directories(rank))
    return fileError(rank, code);

  std::string source;
  llvm::raw_string_ostream sourceStream(source);
  if (mlir::failed(emitRankProgram(planned, info, sourceStream)))
    return error("code generation failed");
  llvm::SmallString<256> sourcePath(rank), weightsPath(rank), program(rank);
  path::append(sourcePath, "step.cpp");
  path::append(weightsPath, "weights.safetensors");
  path::append(program, "train");
  if (llvm::Error e = writeFile(sourcePath, sourceStream.str()))
    return std::move(e);
  if (llvm::Error e = writeWeights(model, planned, weightsPath))
    return std::move(e);
  if (!build.compile)
    return std::string();

  // The runtime this slapoc was built with, found where CMake built it.
  std::vector<std::string> args = {
      SLAPO_HOST_CXX, "-std=c++17", "-O2",
      build.cpu == "portable" ? "-march=x86-64-v2" : "-march=native",
      "-fopenmp", "-I" SLAPO_RUNTIME_INCLUDE_DIR, std::string(sourcePath),
      "-o", std::string(program), SLAPO_RUNTIME_LIBRARY, SLAPO_DNNL_LIBRARY,
      "-lpthread"};
  llvm::SmallString<256> log(rank);
  path::append(log, "compile.log");
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(args[0], argRefs, std::nullopt,
                                         redirects, 0, 0, &message);
  std::string command = llvm::join(args, " ");
  if (status != 0) {
    auto output = llvm::MemoryBuffer::getFile(log);
    return error("compiling rank " + llvm::Twine(info.rank) +
                 " failed: " + command + "\n" +
                 (output ? (*output)->getBuffer() : llvm::StringRef(message)));
  }
  fs::remove(log);
  return command;
}

llvm::Error writeManifestAndLauncher(llvm::StringRef dir,
                                     mlir::ModuleOp planned,
                                     const ManifestInfo &manifest,
                                     const HostBuild &build,
                                     llvm::StringRef compileCommand) {
  auto memory = planned->getAttrOfType<mlir::DictionaryAttr>(kMemoryAttrName);
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("compiler", manifest.compilerVersion);
    json.attribute("schedule", manifest.schedulePath);
    json.attribute("schedule_hash", manifest.scheduleHash);
    json.attributeObject("mesh", [&] {
      json.attribute("dp", manifest.dp);
      json.attribute("tp", manifest.tp);
      json.attribute("pp", manifest.pp);
    });
    json.attribute("train", llvm::json::parse(manifest.trainOptions)
                                .get()); // built by slapoc, well-formed
    json.attributeObject("build", [&] {
      json.attribute("cpu", build.cpu);
      json.attribute("compiled", build.compile);
      json.attribute("command", compileCommand);
    });
    // Where each state_dict entry lives, for slapo-merge: every parameter
    // and buffer under its name, with the other names of tied tensors.
    json.attributeArray("parameters", [&] {
      for (ParamOp param : planned.getOps<ParamOp>())
        json.object([&] {
          json.attribute("name", param.getSymName());
          json.attribute("buffer", param.getBuffer());
          json.attributeArray("shape", [&] {
            for (int64_t size : param.getTensorType().getShape())
              json.value(size);
          });
          json.attributeArray("aliases", [&] {
            if (auto aliases = param.getAliasesAttr())
              for (auto alias : aliases.getAsValueRange<mlir::StringAttr>())
                json.value(alias);
          });
          json.attribute("rank", 0);
        });
    });
    json.attributeArray("ranks", [&] {
      json.object([&] {
        json.attribute("rank", 0);
        json.attribute("dir", rankDir(0));
        json.attribute("fingerprint", getProgramFingerprint(planned));
        json.attribute("program", build.compile ? rankDir(0) + "/train" : "");
        json.attributeObject("planned_memory_bytes", [&] {
          for (mlir::NamedAttribute entry : memory)
            json.attribute(entry.getName().getValue(),
                           entry.getValue().cast<mlir::IntegerAttr>().getInt());
        });
      });
    });
  });
  os << "\n";
  llvm::SmallString<256> manifestPath(dir), launchPath(dir);
  path::append(manifestPath, "manifest.json");
  path::append(launchPath, "launch");
  if (llvm::Error e = writeFile(manifestPath, os.str()))
    return e;

  int64_t worldSize = manifest.dp * manifest.tp * manifest.pp;
  std::string launch =
      "#!/bin/sh\n"
      "# Generated by slapoc: starts the program of this process's rank, "
      "alone or\n# under mpirun / srun (which say the rank and world size).\n"
      "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
      "rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}\n"
      "size=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-${SLURM_NTASKS:-1}}}\n"
      "if [ \"$size\" != " +
      std::to_string(worldSize) +
      " ]; then\n"
      "  echo \"launch: error: compiled for " +
      std::to_string(worldSize) +
      " rank(s) (mesh dp x tp x pp), started with $size\" >&2\n"
      "  exit 1\nfi\n"
      "if [ ! -x \"$here/rank$rank/train\" ]; then\n"
      "  echo \"launch: error: $here/rank$rank/train does not exist (compiled "
      "with --emit=cpp?)\" >&2\n"
      "  exit 1\nfi\n"
      "exec \"$here/rank$rank/train\" \"$@\"\n";
  if (llvm::Error e = writeFile(launchPath, launch))
    return e;
  if (std::error_code code = fs::setPermissions(
          launchPath, fs::all_read | fs::all_exe | fs::owner_write))
    return fileError(launchPath, code);
  return llvm::Error::success();
}

} // namespace slapo
