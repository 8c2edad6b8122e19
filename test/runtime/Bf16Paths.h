//===- Bf16Paths.h - the bf16 contraction paths the tests compare -*- C++
//-*-===//
#ifndef SLAPO_TEST_RUNTIME_BF16PATHS_H
#define SLAPO_TEST_RUNTIME_BF16PATHS_H

#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cpu/Context.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace slapo::rt::cpu {

/// `values` rounded to bf16, and `values` set to what bf16 holds (for a
/// reference that sees what the kernel sees).
inline std::vector<BFloat16> roundToBf16(std::vector<float> &values) {
  std::vector<BFloat16> rounded;
  for (float &value : values) {
    rounded.push_back(BFloat16::fromFloat(value));
    value = rounded.back().toFloat();
  }
  return rounded;
}

/// The contexts whose bf16 contractions (linear, matmul, convolutions) the
/// tests compare: oneDNN's bf16 ones where this CPU has them, and the f32
/// fallback everywhere.
inline std::vector<CpuPaths> getBf16MatmulPaths() {
  CpuPaths supported = getSupportedCpuPaths();
  std::vector<CpuPaths> paths = {{supported.kernels, Bf16Matmul::F32Fallback}};
  if (supported.bf16Matmul == Bf16Matmul::OneDnn)
    paths.push_back(supported);
  return paths;
}

/// Why oneDNN's bf16 contractions are not tested here, when they are not.
inline std::string describeMissingBf16Matmul() {
  if (const char *limit = std::getenv("SLAPO_CPU_ISA"))
    return std::string("skipped: SLAPO_CPU_ISA=") + limit +
           " rules out oneDNN's bf16 matmul";
  return "skipped: CPU lacks avx512_core, which oneDNN's bf16 matmul needs "
         "(oneDNN's ISA here: " +
         getEffectiveIsaName() + ")";
}

} // namespace slapo::rt::cpu

#endif // SLAPO_TEST_RUNTIME_BF16PATHS_H
