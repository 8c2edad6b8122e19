//===- Collectives.cpp - the collectives with the CPU's kernels -----------===//

#include "../comm/CollectivesImpl.h"
#include "slapo/runtime/cpu/Kernels.h"

namespace slapo::rt {
SLAPO_INSTANTIATE_COLLECTIVES(cpu::Context)
} // namespace slapo::rt
