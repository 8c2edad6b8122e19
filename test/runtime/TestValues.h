//===- TestValues.h - deterministic inputs of the kernel tests --*- C++ -*-===//
#ifndef SLAPO_TEST_RUNTIME_TESTVALUES_H
#define SLAPO_TEST_RUNTIME_TESTVALUES_H

#include <cstddef>
#include <vector>

/// `count` values in [-bound, bound): `period` evenly spaced ones in a
/// scrambled order that `seed` shifts (a prime period visits them all).
inline std::vector<float> pattern(size_t count, int seed, float bound = 1,
                                  int period = 101) {
  std::vector<float> values(count);
  float step = period / (2 * bound);
  for (size_t i = 0; i < count; ++i)
    values[i] = float((i * 37 + seed * 11) % period) / step - bound;
  return values;
}

#endif // SLAPO_TEST_RUNTIME_TESTVALUES_H
