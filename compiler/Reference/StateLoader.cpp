//===- StateLoader.cpp - parameters and buffers of a TorchScript file -----===//
#include "slapo/Reference/Interpreter.h"

#include "llvm/Support/FileSystem.h"

#include <torch/script.h>

namespace slapo::reference {
namespace {
std::string firstLine(const std::string &text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line.empty() ? "unknown error" : line;
}
} // namespace

llvm::Expected<TensorMap> loadTorchScriptState(const std::string &path) {
  auto error = [&](const std::string &why) -> llvm::Error {
    return llvm::make_error<llvm::StringError>(
        "cannot load TorchScript model '" + path + "': " + why,
        llvm::inconvertibleErrorCode());
  };
  if (!llvm::sys::fs::exists(path))
    return error("no such file");
  if (llvm::sys::fs::is_directory(path))
    return error("is a directory");
  try {
    torch::jit::Module module = torch::jit::load(path);
    TensorMap state;
    for (const auto &param : module.named_parameters(/*recurse=*/true))
      if (param.value.defined())
        state[param.name] = param.value.detach();
    for (const auto &buffer : module.named_buffers(/*recurse=*/true))
      if (buffer.value.defined())
        state.emplace(buffer.name, buffer.value.detach());
    return state;
  } catch (const c10::Error &e) {
    return error(firstLine(e.what_without_backtrace()));
  } catch (const std::exception &e) {
    return error(firstLine(e.what()));
  } catch (...) {
    return error("unknown exception");
  }
}

} // namespace slapo::reference
