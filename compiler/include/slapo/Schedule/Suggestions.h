//===- Suggestions.h - "did you mean" ---------------------------*- C++ -*-===//
//
// Misspelt names (primitives, arguments, choices) and selectors that match
// no module are answered with the closest valid spellings, by edit distance.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_SUGGESTIONS_H
#define SLAPO_SCHEDULE_SUGGESTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include <optional>
#include <string>
#include <vector>

namespace slapo::schedule {

/// The edit distance of `a` and `b`, or any value above `limit` once it is
/// known to exceed it. Costs O(min(|a|, |b|) * (limit + the length
/// difference)), so a huge string compared with a short one is cheap.
unsigned boundedEditDistance(llvm::StringRef a, llvm::StringRef b,
                             unsigned limit);

/// The candidate `name` is most likely a typo of: the closest one, if at
/// most about a third of `name` (and at least two characters) has to
/// change, else the only one that `name` abbreviates.
std::optional<llvm::StringRef>
findClosestName(llvm::StringRef name,
                llvm::ArrayRef<llvm::StringRef> candidates);

/// How a message writes valid spellings: names of the language (shard,
/// optimizer) bare, string values ("adamw") in double quotes.
enum class Spelling { Name, String };

/// "`problem`; did you mean 'x'? (valid: a, b)": the suggestion only if a
/// candidate is close to `name`, the valid list always.
std::string describeUnknownName(const llvm::Twine &problem,
                                llvm::StringRef name,
                                llvm::ArrayRef<llvm::StringRef> candidates,
                                Spelling spelling);

/// The `count` module paths closest to `text`, closest first; ties keep
/// the paths' order. A path's last components count as a near match, with
/// a distance of one, so that a path missing its first components finds it.
std::vector<std::string> findNearestPaths(llvm::StringRef text,
                                          llvm::ArrayRef<std::string> paths,
                                          size_t count);

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_SUGGESTIONS_H
