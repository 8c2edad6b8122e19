//===- GemmShapes.cpp - the step's contractions, runtime vs OpenBLAS ------===//
//
// Benchmark (not a test) driven by test/bench/gemm_shapes.py: reads one
// contraction a line from stdin, as the generated code calls it,
//
//   linear|matmul LHS RHS OUT PERM_LHS PERM_RHS PERM_RESULT
//
// (dims and permutations comma-separated, "-" for none) and times it
// through (a) the runtime's cpu::linear / cpu::matmul and (b) OpenBLAS's
// cblas_sgemm on the same strided operands (a batch's matrices split over
// the OpenMP threads, one single-threaded call each, or one call using
// them all), the two alternating. Prints one line a contraction: FLOPs, then
// the median seconds of each.
//
//===----------------------------------------------------------------------===//
#include "slapo/runtime/cpu/Context.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace slapo::rt;

namespace {

using Dims = std::vector<int64_t>;

Shape toShape(const Dims &dims) {
  Shape shape;
  shape.rank = dims.size();
  std::copy(dims.begin(), dims.end(), shape.dims);
  return shape;
}

Dims parseList(const std::string &text) {
  Dims values;
  if (text == "-")
    return values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    values.push_back(std::stoll(item));
  return values;
}

int64_t product(const Dims &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Dims and element strides of a row-major `shape` read through
/// `permutation` (`inverse`: the tensor whose permutation is stored).
void strided(const Dims &shape, const Dims &permutation, bool inverse,
             Dims &dims, Dims &strides) {
  Dims stored(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    stored[d - 1] = stored[d] * shape[d];
  dims = shape;
  strides = stored;
  for (size_t d = 0; d < permutation.size(); ++d) {
    if (inverse) {
      dims[permutation[d]] = shape[d];
      strides[permutation[d]] = stored[d];
    } else {
      dims[d] = shape[permutation[d]];
      strides[d] = stored[permutation[d]];
    }
  }
}

struct Operand {
  Dims dims, strides;
  /// The matrix's row and column strides and its batch strides.
  int64_t rowStride() const { return strides[strides.size() - 2]; }
  int64_t colStride() const { return strides.back(); }
  int64_t batchOffset(int64_t batch, const Dims &batchDims) const {
    int64_t offset = 0;
    int rank = dims.size(), batchRank = batchDims.size();
    for (int d = batchRank; d-- > 0;) {
      int64_t index = batch % batchDims[d];
      batch /= batchDims[d];
      int own = d - (batchRank - (rank - 2));
      if (own >= 0 && dims[own] != 1)
        offset += index * strides[own];
    }
    return offset;
  }
};

/// One matrix of the batch through cblas_sgemm: C = A B with any of the
/// three stored transposed.
void sgemm(const Operand &a, const Operand &b, const Operand &c,
           const float *pa, const float *pb, float *pc, int64_t m, int64_t n,
           int64_t k) {
  auto layout = [](const Operand &x, CBLAS_TRANSPOSE &trans, int64_t &ld) {
    if (x.colStride() == 1) {
      trans = CblasNoTrans;
      ld = x.rowStride();
    } else {
      trans = CblasTrans;
      ld = x.colStride();
    }
  };
  CBLAS_TRANSPOSE ta, tb, tc;
  int64_t lda, ldb, ldc;
  layout(a, ta, lda);
  layout(b, tb, ldb);
  layout(c, tc, ldc);
  if (tc == CblasNoTrans) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, pa, lda, pb, ldb, 0.0f,
                pc, ldc);
    return;
  }
  // C^T = B^T A^T, row-major.
  auto flip = [](CBLAS_TRANSPOSE t) {
    return t == CblasNoTrans ? CblasTrans : CblasNoTrans;
  };
  cblas_sgemm(CblasRowMajor, flip(tb), flip(ta), n, m, k, 1.0f, pb, ldb, pa,
              lda, 0.0f, pc, ldc);
}

template <typename F> double medianSeconds(F &&run, int runs) {
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  int runs = argc > 2 ? std::atoi(argv[2]) : 10;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  cpu::Context ctx(threads);
  std::string line;
  std::mt19937 random(0);
  std::uniform_real_distribution<float> uniform(-1, 1);
  while (std::getline(std::cin, line)) {
    std::stringstream fields(line);
    std::string kind, text[6];
    fields >> kind;
    for (std::string &t : text)
      fields >> t;
    Dims lhsShape = parseList(text[0]), rhsShape = parseList(text[1]),
         outShape = parseList(text[2]);
    std::vector<float> lhs(product(lhsShape)), rhs(product(rhsShape)),
        out(product(outShape));
    for (auto *v : {&lhs, &rhs})
      for (float &x : *v)
        x = uniform(random);
    Tensor l(lhs.data(), DType::F32, toShape(lhsShape));
    Tensor r(rhs.data(), DType::F32, toShape(rhsShape));
    Tensor o(out.data(), DType::F32, toShape(outShape));
    Dims pl = parseList(text[3]), pr = parseList(text[4]),
         po = parseList(text[5]);
    MatmulPermutations permutations{pl.empty() ? nullptr : pl.data(),
                                    pr.empty() ? nullptr : pr.data(),
                                    po.empty() ? nullptr : po.data()};
    Operand a, b, c;
    if (kind == "linear") {
      int64_t k = lhsShape.back(), n = rhsShape[0], m = product(lhsShape) / k;
      a = {{m, k}, {k, 1}};
      b = {{k, n}, {1, k}};
      c = {{m, n}, {n, 1}};
    } else {
      strided(lhsShape, pl, false, a.dims, a.strides);
      strided(rhsShape, pr, false, b.dims, b.strides);
      strided(outShape, po, true, c.dims, c.strides);
    }
    int64_t m = c.dims[c.dims.size() - 2], n = c.dims.back(), k = a.dims.back();
    Dims batchDims(c.dims.begin(), c.dims.end() - 2);
    int64_t batches = product(batchDims);
    auto runtime = [&] {
      if (kind == "linear")
        cpu::linear(ctx, l, r, Tensor(), o);
      else
        cpu::matmul(ctx, l, r, o, permutations);
    };
    auto openblas = [&] {
      auto one = [&](int64_t i) {
        sgemm(a, b, c, lhs.data() + a.batchOffset(i, batchDims),
              rhs.data() + b.batchOffset(i, batchDims),
              out.data() + c.batchOffset(i, batchDims), m, n, k);
      };
      if (batches >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < batches; ++i)
          one(i);
      } else {
        for (int64_t i = 0; i < batches; ++i)
          one(i);
      }
    };
    std::vector<double> runtimeSeconds, openblasSeconds;
    runtime();
    openblas();
    runtime();
    openblas();
    for (int i = 0; i < runs; ++i) {
      runtimeSeconds.push_back(medianSeconds(runtime, 1));
      openblasSeconds.push_back(medianSeconds(openblas, 1));
    }
    std::sort(runtimeSeconds.begin(), runtimeSeconds.end());
    std::sort(openblasSeconds.begin(), openblasSeconds.end());
    std::printf("%lld %.6g %.6g %.6g %.6g\n",
                (long long)(2 * batches * m * n * k), runtimeSeconds[runs / 2],
                openblasSeconds[runs / 2], runtimeSeconds.front(),
                openblasSeconds.front());
    std::fflush(stdout);
  }
}
