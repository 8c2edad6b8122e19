//===- Sharding.cpp - what one rank holds of a value ----------------------===//
#include "slapo/Dialect/Sharding.h"

namespace slapo {

std::string Sharding::str() const {
  if (isReplicated())
    return "replicated";
  if (isPartial())
    return "a partial sum";
  return "split along dim " + std::to_string(dim) +
         (chunks > 1 ? " in " + std::to_string(chunks) + " chunks" : "");
}

} // namespace slapo
