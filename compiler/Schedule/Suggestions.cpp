//===- Suggestions.cpp - "did you mean" -----------------------------------===//
#include "slapo/Schedule/Suggestions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <algorithm>

namespace slapo::schedule {

unsigned boundedEditDistance(llvm::StringRef a, llvm::StringRef b,
                             unsigned limit) {
  // StringRef::edit_distance keeps one row as long as its argument and gives
  // up after the row where every entry exceeds the limit: iterate over the
  // longer string, keep a row of the shorter.
  if (a.size() < b.size())
    std::swap(a, b);
  if (a.size() - b.size() > limit)
    return limit + 1;
  // edit_distance reads a limit of 0 as "no limit".
  if (limit == 0)
    return a == b ? 0 : 1;
  return a.edit_distance(b, /*AllowReplacements=*/true, limit);
}

std::optional<llvm::StringRef>
findClosestName(llvm::StringRef name,
                llvm::ArrayRef<llvm::StringRef> candidates) {
  // Two edits cover a swapped pair of characters (f23 for f32), except in
  // names too short for any edit to be a likely typo rather than a change.
  unsigned limit =
      name.size() < 3 ? 1 : std::max<unsigned>(2, (name.size() + 2) / 3);
  std::optional<llvm::StringRef> best;
  unsigned bestDistance = limit + 1;
  for (llvm::StringRef candidate : candidates) {
    unsigned distance = boundedEditDistance(name, candidate, limit);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  if (best || name.size() < 3)
    return best;
  // An abbreviation: the characters of `name` in order in one candidate
  // only, from its first (flash_attn for flash_attention; not fwd, which
  // abbreviates fwd_pre and fwd_post alike).
  auto abbreviates = [&](llvm::StringRef candidate) {
    if (candidate.empty() || candidate[0] != name[0])
      return false;
    size_t matched = 0;
    for (char c : candidate)
      if (matched < name.size() && c == name[matched])
        ++matched;
    return matched == name.size();
  };
  for (llvm::StringRef candidate : candidates) {
    if (!abbreviates(candidate))
      continue;
    if (best)
      return std::nullopt;
    best = candidate;
  }
  return best;
}

std::string describeUnknownName(const llvm::Twine &problem,
                                llvm::StringRef name,
                                llvm::ArrayRef<llvm::StringRef> candidates,
                                Spelling spelling) {
  auto quote = [&](llvm::StringRef text) {
    return spelling == Spelling::String ? ("\"" + text + "\"").str()
                                        : text.str();
  };
  std::string message = problem.str();
  if (auto closest = findClosestName(name, candidates))
    message += spelling == Spelling::String
                   ? "; did you mean " + quote(*closest) + "?"
                   : "; did you mean '" + closest->str() + "'?";
  return message +
         " (valid: " + llvm::join(llvm::map_range(candidates, quote), ", ") +
         ")";
}

std::vector<std::string> findNearestPaths(llvm::StringRef text,
                                          llvm::ArrayRef<std::string> paths,
                                          size_t count) {
  llvm::ArrayRef<std::string> candidates = paths;
  size_t numComponents = text.count('.') + 1;
  // The distance to a path or, one more, to its last components: "h.0" is
  // close to "transformer.h.0".
  auto distanceTo = [&](llvm::StringRef path, unsigned limit) {
    unsigned distance = boundedEditDistance(text, path, limit);
    llvm::StringRef suffix = path;
    for (size_t dots = path.count('.'); dots >= numComponents; --dots)
      suffix = suffix.split('.').second;
    if (suffix.size() != path.size() && limit > 0)
      distance =
          std::min(distance, boundedEditDistance(text, suffix, limit - 1) + 1);
    return distance;
  };
  std::vector<std::pair<unsigned, size_t>> ranked; // (distance, index)
  if (count == 0)
    return {};
  for (size_t i = 0; i < candidates.size(); ++i) {
    // Only a candidate closer than the current count-th best matters.
    unsigned limit = ranked.size() < count
                         ? std::max(text.size(), candidates[i].size())
                         : ranked.back().first;
    unsigned distance = distanceTo(candidates[i], limit);
    if (distance > limit || (ranked.size() == count && distance == limit))
      continue;
    auto position = std::upper_bound(ranked.begin(), ranked.end(),
                                     std::make_pair(distance, i));
    ranked.insert(position, {distance, i});
    if (ranked.size() > count)
      ranked.pop_back();
  }
  std::vector<std::string> nearest;
  for (auto [distance, index] : ranked)
    nearest.push_back(candidates[index]);
  return nearest;
}

} // namespace slapo::schedule
