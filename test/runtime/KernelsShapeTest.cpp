// Reductions, casts and data movement against index arithmetic written out
// here.
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

std::vector<float> iota(size_t count, float start = 0) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), start);
  return values;
}

} // namespace

TEST_CASE("reduce over dim masks") {
  Context ctx(2);
  // in[i][j][k] = 12 i + 4 j + k, shape [2, 3, 4].
  std::vector<float> in = iota(24);
  Tensor input(in.data(), DType::F32, {2, 3, 4});

  std::vector<float> middle(8); // sum over dim 1 -> [2, 4]
  reduce(ctx, ReduceKind::Sum, input, Tensor(middle.data(), DType::F32, {2, 4}),
         0b010);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      CHECK(middle[i * 4 + k] == 3 * (12 * i + k) + 4 * (0 + 1 + 2));

  std::vector<float> outer(3); // sum over dims 0 and 2 -> [3]
  reduce(ctx, ReduceKind::Sum, input, Tensor(outer.data(), DType::F32, {3}),
         0b101);
  for (int j = 0; j < 3; ++j)
    CHECK(outer[j] == 8 * 4 * j + 4 * 12 * (0 + 1) + 2 * (0 + 1 + 2 + 3));

  std::vector<float> last(6); // mean over dim 2, kept as size 1
  reduce(ctx, ReduceKind::Mean, input,
         Tensor(last.data(), DType::F32, {2, 3, 1}), 0b100);
  for (int r = 0; r < 6; ++r)
    CHECK(last[r] == Approx(4 * r + 1.5));

  std::vector<float> first(12); // max over dim 0
  reduce(ctx, ReduceKind::Max, input, Tensor(first.data(), DType::F32, {3, 4}),
         0b001);
  for (int r = 0; r < 12; ++r)
    CHECK(first[r] == 12 + r);

  float all;
  reduce(ctx, ReduceKind::Sum, input, Tensor(&all, DType::F32, {}), 0b111);
  CHECK(all == 23 * 24 / 2);

  std::vector<float> none(24); // no dim: a copy
  reduce(ctx, ReduceKind::Sum, input,
         Tensor(none.data(), DType::F32, {2, 3, 4}), 0);
  CHECK(none == in);
}

TEST_CASE("large reductions in every layout") {
  Context ctx(2);
  const int rows = 300, columns = 517;
  std::vector<float> in(rows * columns);
  for (int i = 0; i < rows * columns; ++i)
    in[i] = float(i % 1000) * 0.001f;
  Tensor input(in.data(), DType::F32, {rows, columns});
  std::vector<float> columnSums(columns), rowMax(rows);
  reduce(ctx, ReduceKind::Sum, input,
         Tensor(columnSums.data(), DType::F32, {columns}), 0b01);
  for (int j = 0; j < columns; ++j) {
    double expected = 0;
    for (int i = 0; i < rows; ++i)
      expected += in[i * columns + j];
    REQUIRE(columnSums[j] == Approx(expected).epsilon(1e-6));
  }
  reduce(ctx, ReduceKind::Max, input, Tensor(rowMax.data(), DType::F32, {rows}),
         0b10);
  for (int i = 0; i < rows; ++i) {
    float expected = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < columns; ++j)
      expected = std::max(expected, in[i * columns + j]);
    REQUIRE(rowMax[i] == expected);
  }
  float mean;
  reduce(ctx, ReduceKind::Mean, input, Tensor(&mean, DType::F32, {}), 0b11);
  double expected = 0;
  for (float x : in)
    expected += x;
  CHECK(mean == Approx(expected / in.size()).epsilon(1e-6));
}

TEST_CASE("column sums split among threads fold each column's rows in order") {
  // Kept outer positions, rows of few columns (a thread's units span two
  // positions) or of several blocks of columns: every thread count gives the
  // bits of a sequential fold in f64, rounded once.
  for (auto [outer, rows, columns] :
       {std::tuple(5, 300, 77), std::tuple(2, 70, 1000), std::tuple(1, 9, 3)})
    for (int threads : {1, 2, 3, 7}) {
      INFO(outer << " x " << rows << " x " << columns << ", threads: "
                 << threads);
      Context ctx(threads);
      std::vector<float> in(size_t(outer) * rows * columns);
      for (size_t i = 0; i < in.size(); ++i)
        in[i] = float(int(i * 7919 % 2003) - 1001) / 37.0f;
      std::vector<float> sums(size_t(outer) * columns, -1.0f);
      reduce(ctx, ReduceKind::Sum,
             Tensor(in.data(), DType::F32, {outer, rows, columns}),
             Tensor(sums.data(), DType::F32, {outer, columns}), 0b010);
      int wrong = 0;
      for (int o = 0; o < outer; ++o)
        for (int j = 0; j < columns; ++j) {
          double expected = 0;
          for (int i = 0; i < rows; ++i)
            expected += in[(size_t(o) * rows + i) * columns + j];
          wrong += sums[size_t(o) * columns + j] != float(expected);
        }
      CHECK(wrong == 0);
    }
}

TEST_CASE("reduce of integers, bf16 and NaN") {
  Context ctx(1);
  std::vector<int64_t> ints = {1, -2, 3, 4, 5, -6}, sums(2);
  reduce(ctx, ReduceKind::Sum, Tensor(ints.data(), DType::I64, {2, 3}),
         Tensor(sums.data(), DType::I64, {2}), 0b10);
  CHECK(sums == std::vector<int64_t>{2, 3});
  reduce(ctx, ReduceKind::Max, Tensor(ints.data(), DType::I64, {2, 3}),
         Tensor(sums.data(), DType::I64, {2}), 0b10);
  CHECK(sums == std::vector<int64_t>{3, 5});

  // 1 + 256 * 2^-8: each partial sum in bf16 would stall at 1 + 2^-7 * k.
  std::vector<BFloat16> halves(257, BFloat16::fromFloat(1.0f / 256));
  halves[0] = BFloat16::fromFloat(1);
  BFloat16 total;
  reduce(ctx, ReduceKind::Sum, Tensor(halves.data(), DType::BF16, {257}),
         Tensor(&total, DType::BF16, {}), 0b1);
  CHECK(total.toFloat() == 2.0f);

  std::vector<float> withNaN = {1, std::numeric_limits<float>::quiet_NaN(), 3};
  float max;
  reduce(ctx, ReduceKind::Max, Tensor(withNaN.data(), DType::F32, {3}),
         Tensor(&max, DType::F32, {}), 0b1);
  CHECK(std::isnan(max));
}

TEST_CASE("a bf16 or f16 sum into f32 or f64 equals the sum of the widened "
          "tensor") {
  // What slapo-propagate-casts makes of sum(cast(x)): the same values added
  // in the same order, in every layout (one run, runs per output, columns).
  Context ctx(2);
  const int64_t rows = 300, columns = 517;
  std::vector<float> wide(rows * columns);
  std::vector<BFloat16> bf16(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    bf16[i] = BFloat16::fromFloat(std::sin(float(i)) * 3);
    wide[i] = bf16[i].toFloat();
  }
  // The same values in f16 (bf16's 8 bits of mantissa fit f16's 11, and
  // these magnitudes its range).
  std::vector<uint16_t> f16(wide.size());
  cast(ctx, Tensor(wide.data(), DType::F32, {rows, columns}),
       Tensor(f16.data(), DType::F16, {rows, columns}));
  struct Layout {
    uint32_t mask;
    Shape out;
  };
  for (Layout layout :
       {Layout{0b01, {columns}}, Layout{0b10, {rows}}, Layout{0b11, {}}}) {
    INFO("dim mask " << layout.mask);
    int64_t outputs = layout.out.rank ? layout.out.dims[0] : 1;
    std::vector<float> fromWide(outputs), fromBf16(outputs, -1),
        fromF16(outputs, -1);
    reduce(ctx, ReduceKind::Sum,
           Tensor(wide.data(), DType::F32, {rows, columns}),
           Tensor(fromWide.data(), DType::F32, layout.out), layout.mask);
    reduce(ctx, ReduceKind::Sum,
           Tensor(bf16.data(), DType::BF16, {rows, columns}),
           Tensor(fromBf16.data(), DType::F32, layout.out), layout.mask);
    reduce(ctx, ReduceKind::Sum,
           Tensor(f16.data(), DType::F16, {rows, columns}),
           Tensor(fromF16.data(), DType::F32, layout.out), layout.mask);
    CHECK(fromBf16 == fromWide);
    CHECK(fromF16 == fromWide);
    std::vector<double> intoF64(outputs);
    reduce(ctx, ReduceKind::Sum,
           Tensor(wide.data(), DType::F32, {rows, columns}),
           Tensor(intoF64.data(), DType::F64, layout.out), layout.mask);
    for (int64_t o = 0; o < outputs; ++o)
      CHECK(float(intoF64[o]) == fromWide[o]);
  }
  // Only sums widen, and only to a type that holds the input's.
  std::vector<float> out(columns);
  CHECK_THROWS_WITH(reduce(ctx, ReduceKind::Max,
                           Tensor(bf16.data(), DType::BF16, {rows, columns}),
                           Tensor(out.data(), DType::F32, {columns}), 0b01),
                    Catch::Contains("reduce"));
  std::vector<BFloat16> narrow(columns);
  CHECK_THROWS_WITH(reduce(ctx, ReduceKind::Sum,
                           Tensor(wide.data(), DType::F32, {rows, columns}),
                           Tensor(narrow.data(), DType::BF16, {columns}), 0b01),
                    Catch::Contains("reduce"));
}

TEST_CASE("cumsum along a dim, forward and from the end") {
  Context ctx(2);
  // in[i][j][k] = 12 i + 4 j + k, shape [2, 3, 4], summed along dim 1.
  std::vector<float> in = iota(24), out(24);
  Tensor input(in.data(), DType::F32, {2, 3, 4});
  Tensor output(out.data(), DType::F32, {2, 3, 4});
  auto at = [](int i, int j, int k) { return 12 * i + 4 * j + k; };
  cumsum(ctx, input, output, 1, /*reverse=*/false);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      CHECK(out[at(i, 0, k)] == at(i, 0, k));
      CHECK(out[at(i, 1, k)] == at(i, 0, k) + at(i, 1, k));
      CHECK(out[at(i, 2, k)] == at(i, 0, k) + at(i, 1, k) + at(i, 2, k));
    }
  cumsum(ctx, input, output, 1, /*reverse=*/true);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      CHECK(out[at(i, 2, k)] == at(i, 2, k));
      CHECK(out[at(i, 0, k)] == at(i, 0, k) + at(i, 1, k) + at(i, 2, k));
    }

  std::vector<int64_t> ints = {1, 0, 1, 1}, positions(4);
  cumsum(ctx, Tensor(ints.data(), DType::I64, {4}),
         Tensor(positions.data(), DType::I64, {4}), 0, false);
  CHECK(positions == std::vector<int64_t>{1, 1, 2, 3});

  // Running f32 sums accumulate in f64, as PyTorch's CPU kernel: an f32
  // accumulator would stay at 2^24.
  std::vector<float> large = {16777216.0f, 1, 1}, sums(3);
  cumsum(ctx, Tensor(large.data(), DType::F32, {3}),
         Tensor(sums.data(), DType::F32, {3}), 0, false);
  CHECK(sums == std::vector<float>{16777216.0f, 16777216.0f, 16777218.0f});
}

TEST_CASE("permute moves dims, for every permutation of three") {
  Context ctx(1);
  const int64_t dims[] = {2, 3, 4};
  std::vector<float> in = iota(24), out(24);
  std::vector<uint16_t> narrow(24), narrowOut(24); // bf16-wide elements
  std::iota(narrow.begin(), narrow.end(), uint16_t(100));
  int64_t permutation[] = {0, 1, 2};
  do {
    Shape outShape{dims[permutation[0]], dims[permutation[1]],
                   dims[permutation[2]]};
    permute(ctx, Tensor(in.data(), DType::F32, {2, 3, 4}),
            Tensor(out.data(), DType::F32, outShape), permutation);
    permute(ctx, Tensor(narrow.data(), DType::BF16, {2, 3, 4}),
            Tensor(narrowOut.data(), DType::BF16, outShape), permutation);
    // Output element (a, b, c) is input element with index[perm[0]] = a,
    // index[perm[1]] = b, index[perm[2]] = c.
    for (int64_t flat = 0; flat < 24; ++flat) {
      int64_t position[3] = {flat / (outShape[1] * outShape[2]),
                             flat / outShape[2] % outShape[1],
                             flat % outShape[2]};
      int64_t index[3];
      for (int i = 0; i < 3; ++i)
        index[permutation[i]] = position[i];
      int64_t source = (index[0] * 3 + index[1]) * 4 + index[2];
      INFO("permutation " << permutation[0] << permutation[1] << permutation[2]
                          << " at " << flat);
      CHECK(out[flat] == in[source]);
      CHECK(narrowOut[flat] == narrow[source]);
    }
  } while (std::next_permutation(permutation, permutation + 3));
}

TEST_CASE("slice with a start and a step") {
  Context ctx(1);
  std::vector<float> in = iota(12), out(6); // [2, 6]
  slice(ctx, Tensor(in.data(), DType::F32, {2, 6}),
        Tensor(out.data(), DType::F32, {2, 3}), 1, 1, 2);
  CHECK(out == std::vector<float>{1, 3, 5, 7, 9, 11});
  std::vector<float> rows(8); // [3, 2, 2] -> rows 1..2 of dim 0
  std::vector<float> cube = iota(12);
  slice(ctx, Tensor(cube.data(), DType::F32, {3, 2, 2}),
        Tensor(rows.data(), DType::F32, {2, 2, 2}), 0, 1, 1);
  CHECK(rows == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
}

TEST_CASE("slice of the last or a middle dim copies the right blocks") {
  // Large enough that two threads share the outer index: q, k and v split
  // from a [B, T, 3 H] projection, and a middle dim with inner elements.
  for (int threads : {1, 2}) {
    Context ctx(threads);
    int64_t outer = 3000, whole = 3 * 64, part = 64;
    std::vector<float> in = iota(outer * whole), out(outer * part);
    slice(ctx, Tensor(in.data(), DType::F32, {outer, whole}),
          Tensor(out.data(), DType::F32, {outer, part}), -1, part, 1);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < part; ++i)
        REQUIRE(out[o * part + i] == in[o * whole + part + i]);
    std::vector<float> middle(outer * 2 * 3);
    slice(ctx, Tensor(in.data(), DType::F32, {outer, 64, 3}),
          Tensor(middle.data(), DType::F32, {outer, 2, 3}), 1, 5, 1);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < 6; ++i)
        REQUIRE(middle[o * 6 + i] == in[o * whole + 5 * 3 + i]);
  }
}

TEST_CASE("concat joins along a dim") {
  Context ctx(1);
  std::vector<float> a = {1, 2}, b = {10, 11, 12, 20, 21, 22}, out(8);
  Tensor inputs[] = {Tensor(a.data(), DType::F32, {2, 1}),
                     Tensor(b.data(), DType::F32, {2, 3})};
  concat(ctx, inputs, 2, Tensor(out.data(), DType::F32, {2, 4}), 1);
  CHECK(out == std::vector<float>{1, 10, 11, 12, 2, 20, 21, 22});
  Tensor stacked[] = {Tensor(b.data(), DType::F32, {2, 3}),
                      Tensor(b.data(), DType::F32, {2, 3})};
  std::vector<float> tall(12);
  concat(ctx, stacked, 2, Tensor(tall.data(), DType::F32, {4, 3}), 0);
  for (int i = 0; i < 12; ++i)
    CHECK(tall[i] == b[i % 6]);
}

TEST_CASE("broadcast expands size-1 and leading dims") {
  Context ctx(1);
  std::vector<float> row = {1, 2, 3}, out(6);
  broadcast(ctx, Tensor(row.data(), DType::F32, {3}),
            Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{1, 2, 3, 1, 2, 3});
  std::vector<float> column = {5, 6};
  broadcast(ctx, Tensor(column.data(), DType::F32, {2, 1}),
            Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{5, 5, 5, 6, 6, 6});
  int32_t scalar = 7;
  std::vector<int32_t> filled(4);
  broadcast(ctx, Tensor(&scalar, DType::I32, {}),
            Tensor(filled.data(), DType::I32, {2, 2}));
  CHECK(filled == std::vector<int32_t>{7, 7, 7, 7});
}

TEST_CASE("cast truncates to integers and tests != 0 for bool") {
  Context ctx(1);
  std::vector<float> in = {-1.7f, 2.9f, 0.0f, 0.25f};
  Tensor input(in.data(), DType::F32, {4});
  std::vector<int32_t> ints(4);
  cast(ctx, input, Tensor(ints.data(), DType::I32, {4}));
  CHECK(ints == std::vector<int32_t>{-1, 2, 0, 0});
  bool flags[4];
  cast(ctx, input, Tensor(flags, DType::Bool, {4}));
  CHECK((flags[0] && flags[1] && !flags[2] && flags[3]));
  std::vector<double> wide(4);
  cast(ctx, Tensor(flags, DType::Bool, {4}),
       Tensor(wide.data(), DType::F64, {4}));
  CHECK(wide == std::vector<double>{1, 1, 0, 1});
  std::vector<BFloat16> narrow(4);
  cast(ctx, input, Tensor(narrow.data(), DType::BF16, {4}));
  for (int i = 0; i < 4; ++i)
    CHECK(narrow[i].bits == BFloat16::fromFloat(in[i]).bits);
  // f16: 2.9 rounds to 2.900390625 (mantissa step 2^-9 in [2, 4)).
  std::vector<uint16_t> half(4);
  std::vector<float> back(4);
  cast(ctx, input, Tensor(half.data(), DType::F16, {4}));
  CHECK(half[0] == 0xbecd); // -1.7 -> -1.7001953125
  cast(ctx, Tensor(half.data(), DType::F16, {4}),
       Tensor(back.data(), DType::F32, {4}));
  CHECK(back[1] == 2.900390625f);
  CHECK(back[2] == 0.0f);
  CHECK(back[3] == 0.25f);
}

TEST_CASE("copy and copyFrom move bytes") {
  Context ctx(2);
  std::vector<float> source = iota(100000, 1), out(100000);
  copyFrom(ctx, Tensor(out.data(), DType::F32, {100000}), source.data());
  CHECK(out == source);
  std::vector<float> again(100000);
  copy(ctx, Tensor(out.data(), DType::F32, {100000}),
       Tensor(again.data(), DType::F32, {1000, 100}));
  CHECK(again == source);
}
