// vexp and vtanh against the C library's double exp and tanh: within 2 ulp
// of the f32 result over the whole range, and IEEE's special values.
#include "slapo/runtime/cpu/VectorMath.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace slapo::rt::cpu::detail;

namespace {

/// The distance from `value` to `exact` in units of the last place of the
/// f32 nearest `exact` (the smallest subnormal's for tiny ones).
double ulpError(float value, double exact) {
  float nearest = static_cast<float>(exact);
  double ulp = std::nextafter(std::fabs(nearest),
                              std::numeric_limits<float>::infinity()) -
               std::fabs(nearest);
  return std::fabs(double(value) - exact) / ulp;
}

/// Calls `body(x)` for `count` evenly spaced floats in [from, to].
template <typename F> void sweep(float from, float to, int count, F body) {
  for (int i = 0; i <= count; ++i)
    body(from + (to - from) * float(i) / float(count));
}

} // namespace

TEST_CASE("vexp is within 2 ulp of exp from underflow to overflow") {
  sweep(-103.0f, 88.7f, 2000000, [](float x) {
    INFO("x = " << x);
    REQUIRE(ulpError(vexp(x), std::exp(double(x))) <= 2.0);
  });
}

TEST_CASE("vexp overflows, underflows and propagates NaN as expf does") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(vexp(0.0f) == 1.0f);
  CHECK(vexp(89.0f) == inf);
  CHECK(vexp(inf) == inf);
  CHECK(vexp(-105.0f) == 0.0f);
  CHECK(vexp(-inf) == 0.0f);
  CHECK(std::isnan(vexp(std::numeric_limits<float>::quiet_NaN())));
  // A subnormal result keeps its few digits.
  CHECK(ulpError(vexp(-100.0f), std::exp(-100.0)) <= 2.0);
}

TEST_CASE("vtanh is within 2 ulp of tanh, across its polynomial's edge") {
  auto check = [](float x) {
    INFO("x = " << x);
    REQUIRE(ulpError(vtanh(x), std::tanh(double(x))) <= 2.0);
  };
  sweep(-12.0f, 12.0f, 2000000, check);
  sweep(0.6f, 0.65f, 100000, check);
  sweep(-1e-3f, 1e-3f, 10000, check);
}

TEST_CASE("vtanh keeps signed zeros, saturates and propagates NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(vtanh(0.0f) == 0.0f);
  CHECK(std::signbit(vtanh(-0.0f)));
  CHECK(vtanh(1e-30f) == 1e-30f);
  CHECK(vtanh(20.0f) == 1.0f);
  CHECK(vtanh(-inf) == -1.0f);
  CHECK(vtanh(inf) == 1.0f);
  CHECK(std::isnan(vtanh(std::numeric_limits<float>::quiet_NaN())));
}
