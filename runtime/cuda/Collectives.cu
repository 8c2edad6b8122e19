//===- Collectives.cu - the collectives with the GPU's kernels ------------===//

#include "../comm/CollectivesImpl.h"
#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt {
SLAPO_INSTANTIATE_COLLECTIVES(cuda::Context)
} // namespace slapo::rt
