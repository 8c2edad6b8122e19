//===- Output.cpp - slapoc's output directory -----------------------------===//
#include "Output.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/Weights.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

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

/// What marks a manifest.json as slapoc's, and the version of the output
/// directory's layout it describes.
constexpr llvm::StringLiteral kOutputFormat = "slapoc-output";
constexpr int64_t kOutputFormatVersion = 1;
/// A manifest larger than this is not slapoc's (one of a model with a
/// thousand parameters on a thousand ranks is a few MiB).
constexpr uint64_t kMaxManifestBytes = 64 << 20;
/// How many of the files slapoc did not write a refusal names.
constexpr size_t kNamedForeignFiles = 5;

//===----------------------------------------------------------------------===//
// Removing the staging directory when slapoc is interrupted
//===----------------------------------------------------------------------===//

constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction previousActions[std::size(kInterruptSignals)];
/// The staging directory the signal handler removes, when set.
char interruptedStaging[PATH_MAX];
volatile sig_atomic_t hasInterruptedStaging = 0;

/// Removes `name` in the directory `parent`, a file or a directory with
/// everything in it, with async-signal-safe calls only: it runs in a signal
/// handler, which may have interrupted the allocator.
void removeTreeAt(int parent, const char *name) {
  if (::unlinkat(parent, name, 0) == 0 || errno != EISDIR)
    return;
  int dir =
      ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return;
  // A compiler still writing into the directory may add entries meanwhile:
  // a few passes remove what it added.
  for (int pass = 0; pass < 3; ++pass) {
    ::lseek(dir, 0, SEEK_SET);
    alignas(struct dirent64) char entries[4096];
    ssize_t size;
    while ((size = ::getdents64(dir, entries, sizeof entries)) > 0)
      for (ssize_t offset = 0; offset < size;) {
        auto *entry = reinterpret_cast<struct dirent64 *>(entries + offset);
        offset += entry->d_reclen;
        if (std::strcmp(entry->d_name, ".") != 0 &&
            std::strcmp(entry->d_name, "..") != 0)
          removeTreeAt(dir, entry->d_name);
      }
    if (::unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno != ENOTEMPTY)
      break;
  }
  ::close(dir);
}

/// Removes the staging directory, then lets the signal do what it did
/// before (LLVM's handler, which removes its own temporary files, or the
/// default: ending the process).
void removeStagingOnSignal(int signal) {
  int savedErrno = errno;
  if (hasInterruptedStaging)
    removeTreeAt(AT_FDCWD, interruptedStaging);
  for (size_t i = 0; i < std::size(kInterruptSignals); ++i)
    if (kInterruptSignals[i] == signal)
      ::sigaction(signal, &previousActions[i], nullptr);
  // Blocked until this handler returns, then handled as before.
  ::raise(signal);
  errno = savedErrno;
}

/// Makes SIGINT, SIGTERM and SIGHUP remove `staging` (the handlers are
/// installed once per process; a signal ignored then stays ignored).
void removeOnInterrupt(llvm::StringRef staging) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action = {};
    action.sa_handler = removeStagingOnSignal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
      ::sigaction(kInterruptSignals[i], nullptr, &previousActions[i]);
      if (previousActions[i].sa_handler != SIG_IGN)
        ::sigaction(kInterruptSignals[i], &action, nullptr);
    }
  });
  hasInterruptedStaging = 0;
  if (staging.size() >= sizeof interruptedStaging)
    return; // Left for the next run to clean up.
  std::memcpy(interruptedStaging, staging.data(), staging.size());
  interruptedStaging[staging.size()] = '\0';
  hasInterruptedStaging = 1;
}

void keepOnInterrupt() { hasInterruptedStaging = 0; }

//===----------------------------------------------------------------------===//
// Which directories slapoc may replace
//===----------------------------------------------------------------------===//

/// The files slapoc wrote in the output directory `dir`, as its manifest
/// lists them; an Error naming the directory `shownAs` if the manifest is not
/// a slapoc output manifest of this format.
llvm::Expected<llvm::StringSet<>> readOwnedFiles(llvm::StringRef dir,
                                                 llvm::StringRef shownAs) {
  llvm::SmallString<256> manifestPath(dir);
  path::append(manifestPath, "manifest.json");
  auto notSlapocs = [&](const llvm::Twine &why) {
    return error(shownAs +
                 ": its manifest.json is not a slapoc output manifest (" + why +
                 "): another program's directory, or an output of an older "
                 "slapoc; refusing to replace it: choose another -o, or "
                 "remove the directory yourself if it is an old output");
  };
  fs::file_status status;
  if (std::error_code code = fs::status(manifestPath, status))
    return fileError(manifestPath, code);
  if (!fs::is_regular_file(status) || status.getSize() > kMaxManifestBytes)
    return notSlapocs("not a small regular file");
  auto buffer = llvm::MemoryBuffer::getFile(manifestPath);
  if (!buffer)
    return fileError(manifestPath, buffer.getError());
  llvm::Expected<llvm::json::Value> manifest =
      llvm::json::parse((*buffer)->getBuffer());
  if (!manifest) {
    llvm::consumeError(manifest.takeError());
    return notSlapocs("not JSON");
  }
  const llvm::json::Object *object = manifest->getAsObject();
  if (!object || object->getString("format") != kOutputFormat)
    return notSlapocs(("no \"format\": \"" + kOutputFormat + "\"").str());
  std::optional<int64_t> version = object->getInteger("format_version");
  if (version != kOutputFormatVersion)
    return error(
        shownAs + ": written by slapoc " +
        object->getString("compiler").value_or("?") + " in output format " +
        (version ? std::to_string(*version) : std::string("?")) +
        ", which this slapoc (" SLAPO_VERSION ", format " +
        llvm::Twine(kOutputFormatVersion) +
        ") does not know; refusing to replace it: choose another -o, or "
        "remove the directory yourself");
  const llvm::json::Array *files = object->getArray("files");
  if (!files)
    return notSlapocs("no \"files\"");
  llvm::StringSet<> owned;
  for (const llvm::json::Value &file : *files)
    if (std::optional<llvm::StringRef> name = file.getAsString())
      owned.insert(*name);
  return owned;
}

bool isEmptyDirectory(llvm::StringRef dir) {
  std::error_code code;
  return fs::directory_iterator(dir, code) == fs::directory_iterator() && !code;
}

/// Succeeds if slapoc may replace `dir`, an existing directory: it is empty,
/// or an earlier output that holds nothing but the files its manifest lists
/// (and empty directories). Otherwise the Error says why and names what would
/// be lost, calling the directory `shownAs` (by default `dir`).
llvm::Error checkReplaceable(llvm::StringRef dir,
                             llvm::StringRef shownAs = "") {
  if (shownAs.empty())
    shownAs = dir;
  if (isEmptyDirectory(dir))
    return llvm::Error::success();
  llvm::SmallString<256> manifest(dir);
  path::append(manifest, "manifest.json");
  if (!fs::exists(manifest))
    return error(shownAs + ": exists and is not a slapoc output directory (no "
                           "manifest.json); refusing to replace it: choose "
                           "another -o, or empty the directory first");
  llvm::Expected<llvm::StringSet<>> owned = readOwnedFiles(dir, shownAs);
  if (!owned)
    return owned.takeError();
  llvm::StringSet<> ownedDirs;
  for (const auto &file : *owned)
    for (llvm::StringRef parent = path::parent_path(file.getKey());
         !parent.empty(); parent = path::parent_path(parent))
      ownedDirs.insert(parent);

  // Files slapoc did not write, and directories holding only such files
  // (named as one, "ckpt/", and not descended into).
  std::vector<std::string> foreign;
  std::error_code code;
  for (fs::recursive_directory_iterator
           it(dir, code, /*follow_symlinks=*/false),
       end;
       it != end && !code; it.increment(code)) {
    llvm::StringRef relative =
        llvm::StringRef(it->path()).drop_front(dir.size() + 1);
    if (it->type() != fs::file_type::directory_file) {
      if (!owned->contains(relative))
        foreign.push_back(relative.str());
      continue;
    }
    if (ownedDirs.contains(relative))
      continue;
    it.no_push();
    if (!isEmptyDirectory(it->path()))
      foreign.push_back(relative.str() + "/");
  }
  if (code)
    return fileError(dir, code);
  if (foreign.empty())
    return llvm::Error::success();
  llvm::sort(foreign);
  size_t named = std::min(foreign.size(), kNamedForeignFiles);
  std::string list = llvm::join(foreign.begin(), foreign.begin() + named, ", ");
  if (foreign.size() > named)
    list += " and " + std::to_string(foreign.size() - named) + " more";
  return error(shownAs + ": holds files slapoc did not write (" + list +
               "); refusing to replace it, which would delete them: move "
               "them out (keep checkpoints outside the output directory, "
               "e.g. --save ckpt beside it), or choose another -o");
}

/// Whether process `pid` has ended. (A staging directory on a file system
/// shared by several machines may be another machine's: its process is not
/// found here either; such directories are left alone only while a process
/// of that number runs here.)
bool hasEnded(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

/// Cleans up after slapoc processes that were killed while writing `target`:
/// removes their staging directories (`target.partial-<pid>`) and puts back
/// an earlier output one was replacing (`target.old-<pid>`) if `target` is
/// missing; if `target` was published already, the earlier output goes when
/// it holds only slapoc's files.
void cleanUpAfterKilledRuns(llvm::StringRef target) {
  llvm::StringRef parent = path::parent_path(target);
  llvm::StringRef base = path::filename(target);
  std::error_code code;
  for (fs::directory_iterator it(parent, code), end; it != end && !code;
       it.increment(code)) {
    llvm::StringRef suffix = path::filename(it->path());
    if (!suffix.consume_front(base))
      continue;
    bool staging = suffix.consume_front(".partial-");
    int pid = 0;
    if ((!staging && !suffix.consume_front(".old-")) ||
        suffix.getAsInteger(10, pid) || pid <= 0 || !hasEnded(pid))
      continue;
    if (staging)
      fs::remove_directories(it->path());
    else if (!fs::exists(target))
      fs::rename(it->path(), target);
    else if (llvm::Error e = checkReplaceable(it->path()))
      llvm::consumeError(std::move(e));
    else
      fs::remove_directories(it->path());
  }
}

} // namespace

llvm::Expected<StagedDirectory>
StagedDirectory::create(llvm::StringRef target) {
  llvm::SmallString<256> absolute(target);
  if (std::error_code code = fs::make_absolute(absolute))
    return fileError(target, code);
  path::remove_dots(absolute, /*remove_dot_dot=*/true);
  while (absolute.size() > 1 && path::is_separator(absolute.back()))
    absolute.pop_back();
  cleanUpAfterKilledRuns(absolute);
  if (fs::exists(absolute)) {
    if (!fs::is_directory(absolute))
      return error(target + ": exists and is not a directory");
    if (llvm::Error e = checkReplaceable(absolute))
      return std::move(e);
  }
  std::string staging =
      (absolute + ".partial-" + llvm::Twine(llvm::sys::Process::getProcessId()))
          .str();
  fs::remove_directories(staging);
  if (std::error_code code = fs::create_directories(staging))
    return fileError(staging, code);
  removeOnInterrupt(staging);
  return StagedDirectory(absolute.str().str(), staging);
}

StagedDirectory::StagedDirectory(StagedDirectory &&other)
    : target(std::move(other.target)), staging(std::move(other.staging)) {
  other.staging.clear();
}

StagedDirectory::~StagedDirectory() {
  if (staging.empty())
    return;
  keepOnInterrupt();
  fs::remove_directories(staging);
}

llvm::Error StagedDirectory::publish() {
  // The earlier output is checked where it is, for a clear message, and
  // again once renamed away, when no path leads into it any more.
  std::string previous;
  if (fs::exists(target)) {
    if (llvm::Error e = checkReplaceable(target))
      return e;
    previous =
        (target + ".old-" + llvm::Twine(llvm::sys::Process::getProcessId()))
            .str();
    if (std::error_code code = fs::rename(target, previous))
      return fileError(target, code);
    if (llvm::Error e = checkReplaceable(previous, target)) {
      fs::rename(previous, target);
      return e;
    }
  }
  if (std::error_code code = fs::rename(staging, target)) {
    if (!previous.empty())
      fs::rename(previous, target);
    return fileError(target, code);
  }
  keepOnInterrupt();
  staging.clear();
  if (!previous.empty())
    fs::remove_directories(previous);
  return llvm::Error::success();
}

namespace {

/// How the rank program is built against the runtime this slapoc was built
/// with, found where CMake built it: the host compiler and the CPU backend,
/// or nvcc and the CUDA backend. The host code is for any x86-64 CPU, as the
/// runtime is: its loops choose their instruction set at start-up, and so
/// does oneDNN.
struct BuildCommand {
  /// The compiler and its options, for compiling and for linking.
  std::vector<std::string> compiler;
  /// What the program links, after its sources or objects.
  std::vector<std::string> libraries;
};

llvm::Expected<BuildCommand> getBuildCommand(const HostBuild &build) {
  const std::string hostArch = "-march=x86-64";
  BuildCommand command;
  if (build.target == "cpu") {
    // As the runtime's loops are built (runtime/CMakeLists.txt): the fused
    // loops (FusedLoop.h) must round as the kernels they replace, so no
    // contraction into fused multiply-adds in their AVX2 and AVX-512 builds.
    command.compiler = {SLAPO_HOST_CXX,
                        "-std=c++17",
                        "-O2",
                        hostArch,
                        "-fno-trapping-math",
                        "-fno-math-errno",
                        "-ffp-contract=off",
                        "-fopenmp",
                        "-I" SLAPO_RUNTIME_INCLUDE_DIR};
    command.libraries = {SLAPO_RUNTIME_CPU_LIBRARY, SLAPO_RUNTIME_LIBRARY,
                         SLAPO_FORMAT_LIBRARY, SLAPO_DNNL_LIBRARY};
  } else {
#ifdef SLAPO_NVCC
    // SASS for the architecture and its PTX, which newer GPUs compile at
    // load time. The CUDA runtime is linked statically (nvcc's default), so
    // the program needs only the driver, cuBLASLt, cuDNN and NCCL where it
    // runs. No contraction into fused multiply-adds: the fused kernels must
    // round as the runtime's elementwise kernels they replace
    // (ElementMath.cuh).
    std::string arch = std::to_string(build.cudaArch);
    command.compiler = {SLAPO_NVCC,
                        "-std=c++17",
                        "-O2",
                        "--fmad=false",
                        "-gencode=arch=compute_" + arch + ",code=[sm_" + arch +
                            ",compute_" + arch + "]",
                        "-Xcompiler=" + hostArch,
                        "-I" SLAPO_RUNTIME_INCLUDE_DIR};
    command.libraries = {SLAPO_RUNTIME_CUDA_LIBRARY,
                         SLAPO_RUNTIME_LIBRARY,
                         SLAPO_FORMAT_LIBRARY,
                         "-L" SLAPO_CUDA_LIBRARY_DIR,
                         "-lcublasLt",
                         "-lcudnn",
                         SLAPO_NCCL_LIBRARY};
#else
    return error("--target=cuda: this slapoc was built without the CUDA "
                 "backend (" SLAPO_CUDA_NOT_BUILT_REASON ")");
#endif
  }
  llvm::SmallVector<llvm::StringRef> mpiArguments;
  llvm::StringRef(SLAPO_MPI_LINK_ARGUMENTS)
      .split(mpiArguments, ' ', -1, /*KeepEmpty=*/false);
  command.libraries.insert(command.libraries.end(), mpiArguments.begin(),
                           mpiArguments.end());
  command.libraries.push_back("-lpthread");
  return command;
}

/// A compiler (or linker) run, its output going to a log file.
struct CompilerRun {
  std::vector<std::string> args;
  std::string log;
  llvm::sys::ProcessInfo process;
  /// Why it could not be started; empty if it was.
  std::string startError;
};

CompilerRun startCompiler(std::vector<std::string> args, std::string log) {
  CompilerRun run{std::move(args), std::move(log), {}, {}};
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(run.log), llvm::StringRef(run.log)};
  std::vector<llvm::StringRef> argRefs(run.args.begin(), run.args.end());
  run.process = llvm::sys::ExecuteNoWait(run.args[0], argRefs, std::nullopt,
                                         redirects, 0, &run.startError);
  return run;
}

/// Waits for every run; fails with the command and the output of the first
/// that failed. The logs of those that succeeded are removed.
llvm::Error waitForCompilers(std::vector<CompilerRun> &runs) {
  std::optional<std::string> firstFailure;
  for (CompilerRun &run : runs) {
    std::string output = run.startError;
    if (output.empty()) {
      if (llvm::sys::Wait(run.process, std::nullopt, &output).ReturnCode == 0) {
        fs::remove(run.log);
        continue;
      }
      if (auto log = llvm::MemoryBuffer::getFile(run.log))
        output = (*log)->getBuffer().str();
    }
    if (!firstFailure)
      firstFailure =
          "compiling the rank program failed: " + llvm::join(run.args, " ") +
          "\n" + output;
  }
  return firstFailure ? error(*firstFailure) : llvm::Error::success();
}

/// rank<rank>/: the program's source and, unless sources only, the program
/// itself: its translation units compiled at once, then linked.
llvm::Expected<std::string> writeProgram(llvm::StringRef dir, int rankNumber,
                                         mlir::ModuleOp planned,
                                         const RankProgramInfo &info,
                                         const HostBuild &build,
                                         mlir::TimingScope &timing) {
  llvm::SmallString<256> rank(dir);
  path::append(rank, rankDir(rankNumber));
  auto inRank = [&](const llvm::Twine &name) {
    llvm::SmallString<256> file(rank);
    path::append(file, name);
    return std::string(file);
  };
  mlir::TimingScope emissionTiming = timing.nest("emission");
  mlir::FailureOr<std::vector<SourceFile>> files =
      emitRankProgram(planned, info);
  if (mlir::failed(files))
    return error("code generation failed");
  std::vector<std::string> units;
  for (const SourceFile &file : *files) {
    if (llvm::Error e = writeFile(inRank(file.name), file.text))
      return std::move(e);
    if (!llvm::StringRef(file.name).endswith(".h"))
      units.push_back(inRank(file.name));
  }
  emissionTiming.stop();
  if (!build.compile)
    return std::string();

  mlir::TimingScope compileTiming = timing.nest("host compile");
  llvm::Expected<BuildCommand> command = getBuildCommand(build);
  if (!command)
    return command.takeError();
  // One unit is compiled and linked by one command; several are compiled
  // each by its own, all at once, into objects the link then removes.
  std::vector<std::string> link = command->compiler;
  std::vector<std::string> objects;
  std::vector<CompilerRun> compiles;
  if (units.size() == 1) {
    link.push_back(units.front());
  } else {
    for (const std::string &unit : units) {
      std::string object = inRank(path::stem(unit) + ".o");
      std::vector<std::string> args = command->compiler;
      args.insert(args.end(), {"-c", unit, "-o", object});
      compiles.push_back(
          startCompiler(std::move(args), inRank(path::stem(unit) + ".log")));
      objects.push_back(object);
      link.push_back(object);
    }
  }
  link.insert(link.end(), {"-o", inRank("train")});
  link.insert(link.end(), command->libraries.begin(), command->libraries.end());
  std::vector<std::string> commands;
  for (const CompilerRun &run : compiles)
    commands.push_back(llvm::join(run.args, " "));
  commands.push_back(llvm::join(link, " "));
  if (llvm::Error e = waitForCompilers(compiles))
    return std::move(e);
  std::vector<CompilerRun> linking;
  linking.push_back(startCompiler(link, inRank("compile.log")));
  if (llvm::Error e = waitForCompilers(linking))
    return std::move(e);
  for (const std::string &object : objects)
    fs::remove(object);
  return llvm::join(commands, " && ");
}

/// rank<rank>/`name` as a hard link to rank<source>'s, if that exists: ranks
/// share the files that are the same for them.
llvm::Error linkFromRank(llvm::StringRef dir, int source, int rank,
                         llvm::StringRef name) {
  llvm::SmallString<256> sourcePath(dir), target(dir);
  path::append(sourcePath, rankDir(source), name);
  path::append(target, rankDir(rank), name);
  if (!fs::exists(sourcePath))
    return llvm::Error::success();
  if (!fs::create_hard_link(sourcePath, target))
    return llvm::Error::success();
  // Another file system under the output directory: a copy is as good.
  if (std::error_code code = fs::copy_file(sourcePath, target))
    return fileError(target, code);
  if (std::error_code code =
          fs::setPermissions(target, *fs::getPermissions(sourcePath)))
    return fileError(target, code);
  return llvm::Error::success();
}

/// The files under `dir`, as paths relative to it.
llvm::Expected<std::vector<std::string>> listFiles(llvm::StringRef dir) {
  std::vector<std::string> files;
  std::error_code code;
  for (fs::recursive_directory_iterator
           it(dir, code, /*follow_symlinks=*/false),
       end;
       it != end && !code; it.increment(code))
    if (it->type() != fs::file_type::directory_file)
      files.push_back(
          llvm::StringRef(it->path()).drop_front(dir.size() + 1).str());
  if (code)
    return fileError(dir, code);
  return files;
}

} // namespace

llvm::Expected<std::string>
writeRanks(llvm::StringRef dir, llvm::ArrayRef<mlir::ModuleOp> stages,
           TorchScriptModel &model, const RankProgramInfo &info,
           const HostBuild &build, mlir::TimingScope &timing) {
  // The weights first, which fail faster than compiling. World rank w of
  // stage k is tp rank w % tp: the stage's rank of dp rank 0 writes that tp
  // rank's shards of the stage's parameters, and the stage's ranks of the
  // other dp ranks link to them.
  int stageSize = static_cast<int>(info.dp * info.tp);
  mlir::TimingScope weightsTiming = timing.nest("weights");
  for (auto [stage, planned] : llvm::enumerate(stages)) {
    int first = static_cast<int>(stage) * stageSize;
    for (int rank = first; rank < first + stageSize; ++rank) {
      llvm::SmallString<256> rankPath(dir);
      path::append(rankPath, rankDir(rank));
      if (std::error_code code = fs::create_directories(rankPath))
        return fileError(rankPath, code);
      int tpRank = static_cast<int>(rank % info.tp);
      if (rank != first + tpRank) {
        if (llvm::Error e =
                linkFromRank(dir, first + tpRank, rank, "weights.safetensors"))
          return std::move(e);
        continue;
      }
      llvm::SmallString<256> weightsPath(rankPath);
      path::append(weightsPath, "weights.safetensors");
      if (llvm::Error e =
              writeWeights(model, planned, tpRank, info.tp, weightsPath))
        return std::move(e);
    }
  }
  weightsTiming.stop();
  // Every rank of a stage runs the program of the stage's first rank, on
  // its own weights.
  std::vector<std::string> commands;
  for (auto [stage, planned] : llvm::enumerate(stages)) {
    int first = static_cast<int>(stage) * stageSize;
    RankProgramInfo stageInfo = info;
    stageInfo.pp = static_cast<int64_t>(stages.size());
    stageInfo.stage = static_cast<int64_t>(stage);
    llvm::Expected<std::string> command =
        writeProgram(dir, first, planned, stageInfo, build, timing);
    if (!command)
      return command.takeError();
    if (!command->empty())
      commands.push_back(*command);
    for (int rank = first + 1; rank < first + stageSize; ++rank)
      if (llvm::Error e = linkFromRank(dir, first, rank, "train"))
        return std::move(e);
  }
  return llvm::join(commands, " && ");
}

llvm::Error writeManifestAndLauncher(llvm::StringRef dir,
                                     llvm::ArrayRef<mlir::ModuleOp> stages,
                                     const ManifestInfo &manifest,
                                     const HostBuild &build,
                                     llvm::StringRef compileCommand) {
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
  llvm::SmallString<256> launchPath(dir);
  path::append(launchPath, "launch");
  if (llvm::Error e = writeFile(launchPath, launch))
    return e;
  if (std::error_code code = fs::setPermissions(
          launchPath, fs::all_read | fs::all_exe | fs::owner_write))
    return fileError(launchPath, code);

  llvm::Expected<std::vector<std::string>> files = listFiles(dir);
  if (!files)
    return files.takeError();
  files->push_back("manifest.json");
  llvm::sort(*files);
  mlir::ModuleOp firstStage = stages.front();
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  // What slapo-checkpoint recomputes in a stage's program, and what a
  // memory budget chose.
  auto writeRecomputation = [&](mlir::ModuleOp planned) {
    auto recomputation =
        planned->getAttrOfType<mlir::DictionaryAttr>(kRecomputationAttrName);
    if (!recomputation)
      return;
    json.attributeObject("recomputation", [&] {
      for (mlir::NamedAttribute entry : recomputation) {
        if (auto integer = entry.getValue().dyn_cast<mlir::IntegerAttr>())
          json.attribute(entry.getName().getValue(), integer.getInt());
        else
          json.attributeArray(entry.getName().getValue(), [&] {
            for (llvm::StringRef module :
                 entry.getValue()
                     .cast<mlir::ArrayAttr>()
                     .getAsValueRange<mlir::StringAttr>())
              json.value(module);
          });
      }
    });
  };
  json.object([&] {
    json.attribute("format", kOutputFormat);
    json.attribute("format_version", kOutputFormatVersion);
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
    // How balanced the pipeline stages are, as slapo-cut-pipeline-stage
    // estimates (the FLOPs of one microbatch's contractions, forward and
    // backward), and the cuts it finds best balanced.
    if (auto balance = firstStage->getAttrOfType<mlir::DictionaryAttr>(
            kPipelineBalanceAttrName))
      json.attributeObject("pipeline_balance", [&] {
        for (mlir::NamedAttribute entry : balance)
          json.attributeArray(entry.getName().getValue(), [&] {
            for (mlir::Attribute element :
                 entry.getValue().cast<mlir::ArrayAttr>()) {
              if (auto integer = element.dyn_cast<mlir::IntegerAttr>())
                json.value(integer.getInt());
              else
                json.value(element.cast<mlir::StringAttr>().getValue());
            }
          });
      });
    json.attributeObject("build", [&] {
      json.attribute("target", build.target);
      if (build.target == "cuda")
        json.attribute("cuda_arch", "sm_" + std::to_string(build.cudaArch));
      json.attribute("compiled", build.compile);
      json.attribute("command", compileCommand);
    });
    // Where each state_dict entry lives, for slapo-merge: every parameter
    // and buffer under its name, with the other names of tied tensors and
    // the model's (global) shape. A sharded one's "shard" says how the tp
    // ranks' weights and checkpoint files split it (slapo/runtime/Shard.h);
    // the others are whole in every rank's files. With pipeline stages,
    // "stages" lists those whose ranks hold the parameter (two for one tied
    // across stages, whose copies are alike).
    std::vector<std::pair<ParamOp, std::vector<int64_t>>> params;
    llvm::StringMap<size_t> paramIndex;
    for (auto [stage, planned] : llvm::enumerate(stages))
      for (ParamOp param : mlir::ModuleOp(planned).getOps<ParamOp>()) {
        auto [it, inserted] =
            paramIndex.try_emplace(param.getSymName(), params.size());
        if (inserted)
          params.push_back({param, {}});
        params[it->second].second.push_back(static_cast<int64_t>(stage));
      }
    json.attributeArray("parameters", [&] {
      for (auto &[param, holders] : params)
        json.object([&] {
          std::optional<uint64_t> axis = param.getShardAxis();
          json.attribute("name", param.getSymName());
          json.attribute("buffer", param.getBuffer());
          json.attributeArray("shape", [&] {
            llvm::ArrayRef<int64_t> shape = param.getTensorType().getShape();
            for (uint64_t dim = 0; dim < shape.size(); ++dim)
              json.value(axis && dim == *axis ? shape[dim] * manifest.tp
                                              : shape[dim]);
          });
          json.attributeArray("aliases", [&] {
            if (auto aliases = param.getAliasesAttr())
              for (auto alias : aliases.getAsValueRange<mlir::StringAttr>())
                json.value(alias);
          });
          if (axis)
            json.attributeObject("shard", [&] {
              json.attribute("axis", static_cast<int64_t>(*axis));
              json.attribute("chunks", static_cast<int64_t>(
                                           param.getShardChunks().value_or(1)));
            });
          if (stages.size() > 1)
            json.attributeArray("stages", [&] {
              for (int64_t stage : holders)
                json.value(stage);
            });
        });
    });
    // World rank r is, in Megatron's order (as the runtime's ProcessMesh
    // lays them out), pipeline stage r / (dp * tp), dp rank r / tp % dp and
    // tp rank r % tp.
    int64_t stageSize = manifest.dp * manifest.tp;
    json.attributeArray("ranks", [&] {
      for (int64_t rank = 0; rank < worldSize; ++rank)
        json.object([&] {
          mlir::ModuleOp planned = stages[rank / stageSize];
          auto memory =
              planned->getAttrOfType<mlir::DictionaryAttr>(kMemoryAttrName);
          json.attribute("rank", rank);
          json.attribute("pp_rank", rank / stageSize);
          json.attribute("dp_rank", rank / manifest.tp % manifest.dp);
          json.attribute("tp_rank", rank % manifest.tp);
          json.attribute("dir", rankDir(rank));
          json.attribute("fingerprint", getProgramFingerprint(planned));
          json.attribute("program",
                         build.compile ? rankDir(rank) + "/train" : "");
          // The plan's counts of microbatches go beside its bytes.
          auto isCount = [](mlir::NamedAttribute entry) {
            return entry.getName() == kMicrobatchesKey ||
                   entry.getName() == kMicrobatchesInFlightKey;
          };
          auto integer = [](mlir::NamedAttribute entry) {
            return entry.getValue().cast<mlir::IntegerAttr>().getInt();
          };
          json.attributeObject("planned_memory_bytes", [&] {
            for (mlir::NamedAttribute entry : memory)
              if (!isCount(entry))
                json.attribute(entry.getName().getValue(), integer(entry));
          });
          for (mlir::NamedAttribute entry : memory)
            if (isCount(entry))
              json.attribute(entry.getName().getValue(), integer(entry));
          writeRecomputation(planned);
        });
    });
    // What a later compilation into this directory may replace.
    json.attributeArray("files", [&] {
      for (const std::string &file : *files)
        json.value(file);
    });
  });
  os << "\n";
  llvm::SmallString<256> manifestPath(dir);
  path::append(manifestPath, "manifest.json");
  return writeFile(manifestPath, os.str());
}

} // namespace slapo
