#include "slapo/runtime/Tensor.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace slapo::rt;

TEST_CASE("dtype names round-trip and sizes are the element widths") {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16,
                      DType::I8, DType::I32, DType::I64, DType::Bool}) {
    DType parsed;
    REQUIRE(parseDType(getName(dtype), parsed));
    CHECK(parsed == dtype);
  }
  CHECK(getSize(DType::BF16) == 2);
  CHECK(getSize(DType::I64) == 8);
  DType unused;
  CHECK_FALSE(parseDType("F31", unused));
}

TEST_CASE("bf16 rounds to nearest even") {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: it rounds
  // to the even one, 1. 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  CHECK(BFloat16::fromFloat(1.0f + 1.0f / 256).toFloat() == 1.0f);
  CHECK(BFloat16::fromFloat(1.0f + 3.0f / 256).toFloat() == 1.0f + 1.0f / 64);
  CHECK(BFloat16::fromFloat(-2.5f).toFloat() == -2.5f);
}

TEST_CASE("bf16 keeps infinities and NaNs, and rounds past the largest to "
          "infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(BFloat16::fromFloat(inf).toFloat() == inf);
  CHECK(BFloat16::fromFloat(-inf).toFloat() == -inf);
  CHECK(BFloat16::fromFloat(std::numeric_limits<float>::max()).toFloat() ==
        inf);
  // A NaN whose payload lies only in the low 16 bits would round into
  // infinity's bits; it stays a (quiet) NaN.
  uint32_t lowPayload = 0x7f800001u;
  float nan;
  std::memcpy(&nan, &lowPayload, sizeof nan);
  CHECK(std::isnan(BFloat16::fromFloat(nan).toFloat()));
  CHECK(std::isnan(
      BFloat16::fromFloat(std::numeric_limits<float>::quiet_NaN()).toFloat()));
}

TEST_CASE("shapes count elements and print") {
  Shape shape{8, 32};
  CHECK(shape.getNumElements() == 256);
  CHECK(shape.str() == "[8, 32]");
  CHECK(Shape{}.getNumElements() == 1);
  CHECK(Shape{2, 0}.getNumElements() == 0);
}
