//===- CpuPaths.cpp - the kernel paths this CPU supports ------------------===//
//
// The CPUs this runtime meets range from AVX2 only (where oneDNN 2.6 cannot
// create a bf16 matmul or convolution) to AVX-512 with AMX, and one program
// must run on all of them: what the kernels use is decided here once, at
// start-up, from cpuid and from oneDNN's effective ISA. SLAPO_CPU_ISA caps
// oneDNN's ISA (dnnl::set_max_cpu_isa) and with it the paths chosen, so that
// the paths of a smaller CPU can be tested on any machine.
//
//===----------------------------------------------------------------------===//
#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Context.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>

namespace slapo::rt::cpu {

namespace {

struct NamedIsa {
  const char *name;
  dnnl::cpu_isa isa;
};

/// oneDNN's ISAs by the names its DNNL_MAX_CPU_ISA takes (in lower case),
/// narrowest first.
constexpr NamedIsa kOneDnnIsas[] = {
    {"sse41", dnnl::cpu_isa::sse41},
    {"avx", dnnl::cpu_isa::avx},
    {"avx2", dnnl::cpu_isa::avx2},
    {"avx2_vnni", dnnl::cpu_isa::avx2_vnni},
    {"avx512_core", dnnl::cpu_isa::avx512_core},
    {"avx512_core_vnni", dnnl::cpu_isa::avx512_core_vnni},
    {"avx512_core_bf16", dnnl::cpu_isa::avx512_core_bf16},
    {"avx512_core_amx", dnnl::cpu_isa::avx512_core_amx},
};

/// Whether oneDNN may use `isa`'s instructions: each ISA's value is the set
/// of instruction-set bits it includes.
bool includes(dnnl::cpu_isa effective, dnnl::cpu_isa isa) {
  auto bits = static_cast<unsigned>(isa);
  return (static_cast<unsigned>(effective) & bits) == bits;
}

/// Whether oneDNN can create a bf16 matmul and bf16 convolutions (the
/// forward and both gradients) summing in f32, as the contractions of mixed
/// precision ask it to.
bool hasOneDnnBf16Contractions() {
  using Type = dnnl::memory::data_type;
  using Tag = dnnl::memory::format_tag;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::memory::desc bf16({16, 16}, Type::bf16, Tag::ab);
  dnnl::memory::desc f32({16, 16}, Type::f32, Tag::ab);
  dnnl::memory::desc image({2, 16, 4, 4}, Type::bf16, Tag::nchw);
  dnnl::memory::desc filter({16, 16, 3, 3}, Type::bf16, Tag::oihw);
  dnnl::memory::dims ones = {1, 1}, zeros = {0, 0};
  auto algorithm = dnnl::algorithm::convolution_direct;
  try {
    dnnl::matmul::primitive_desc(dnnl::matmul::desc(bf16, bf16, f32), engine);
    dnnl::convolution_forward::primitive_desc forward(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        algorithm, image, filter, image, ones,
                                        zeros, ones, ones),
        engine);
    dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(algorithm, image, filter, image,
                                              ones, zeros, ones, ones),
        engine, forward);
    dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(
            algorithm, image, filter, image, ones, zeros, ones, ones),
        engine, forward);
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

/// Applies SLAPO_CPU_ISA, then reads what the CPU and oneDNN support.
CpuPaths detectCpuPaths() {
  if (const char *limit = std::getenv("SLAPO_CPU_ISA")) {
    const NamedIsa *named = nullptr;
    for (const NamedIsa &candidate : kOneDnnIsas)
      if (std::strcmp(candidate.name, limit) == 0)
        named = &candidate;
    if (!named)
      throw Error(std::string("SLAPO_CPU_ISA=") + limit + " is not one of " +
                  getCpuIsaNames());
    // oneDNN accepts a limit only before it has dispatched anything, which
    // in a rank program it has not.
    if (dnnl::set_max_cpu_isa(named->isa) != dnnl::status::success)
      throw Error(std::string("SLAPO_CPU_ISA=") + limit +
                  ": oneDNN refused the limit (it was set after oneDNN's "
                  "first use)");
  }
  dnnl::cpu_isa effective = dnnl::get_effective_cpu_isa();
  KernelIsa kernels = KernelIsa::X86_64;
  if (__builtin_cpu_supports("x86-64-v4") &&
      includes(effective, dnnl::cpu_isa::avx512_core))
    kernels = KernelIsa::Avx512;
  else if (__builtin_cpu_supports("x86-64-v3") &&
           includes(effective, dnnl::cpu_isa::avx2))
    kernels = KernelIsa::Avx2;
  return {kernels, hasOneDnnBf16Contractions() ? Bf16Matmul::OneDnn
                                               : Bf16Matmul::F32Fallback};
}

} // namespace

const CpuPaths &getSupportedCpuPaths() {
  static const CpuPaths paths = detectCpuPaths();
  return paths;
}

std::string getEffectiveIsaName() {
  dnnl::cpu_isa effective = dnnl::get_effective_cpu_isa();
  for (const NamedIsa &named : kOneDnnIsas)
    if (named.isa == effective)
      return named.name;
  return "isa " + std::to_string(static_cast<unsigned>(effective));
}

const char *getCpuIsaNames() {
  static const std::string names = [] {
    std::string list;
    for (const NamedIsa &named : kOneDnnIsas)
      list += (list.empty() ? "" : ", ") + std::string(named.name);
    return list;
  }();
  return names.c_str();
}

const char *getName(KernelIsa isa) {
  constexpr const char *kNames[] = {"x86-64", "avx2", "avx512"};
  return kNames[static_cast<int>(isa)];
}

const char *getName(Bf16Matmul path) {
  return path == Bf16Matmul::OneDnn ? "oneDNN" : "f32 fallback";
}

} // namespace slapo::rt::cpu
