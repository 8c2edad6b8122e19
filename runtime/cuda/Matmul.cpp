//===- Matmul.cpp - linear and matmul through cuBLASLt --------------------===//
//
// Both contractions are one product out[M, N] = lhs[M, K] * rhs[K, N] over
// batch dims, each operand addressed through its own strides (the
// permutations of MatmulPermutations are only strides). cuBLASLt is
// column-major: a row-major [M, N] is a column-major [N, M], so the product
// runs as out^T = rhs^T * lhs^T, each operand transposed or not as its
// strides say. Where an operand's strides fit no cuBLASLt layout (neither
// of its matrix dims has stride 1), it is first permuted into contiguous
// scratch; a result that does not fit is computed into scratch and
// permuted into place. Batch dims become cuBLASLt's strided batch (stride 0
// for a broadcast operand), and the outer ones that do not merge with it a
// loop of launches; a right operand shared by the whole batch folds the
// batch into M (one larger GEMM).
//
// f32 runs in exact f32 (CUBLAS_COMPUTE_32F, no TF32, as PyTorch's
// default); bf16 operands accumulate in f32 and are rounded once to out's
// dtype (bf16, or f32 for mixed precision). A linear's bias enters the f32
// sum too: through the epilogue for an f32 result; for a bf16 one as C (out
// starts as the broadcast bias, beta = 1), because cuBLASLt's bias epilogue
// rounds a bf16 product before adding the bias (seen on an H200: 8 bf16
// ulps off; PyTorch's addmm moved to C for the same reason). Descriptors
// and the heuristic's algorithm are made once per combination of shapes,
// strides, dtypes and alignments and kept in the context.
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/cuda/Kernels.h"

#include <cublasLt.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace slapo::rt::cuda {

namespace {

cudaDataType_t getDataType(const char *kernel, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    throw Error(std::string("the CUDA kernel '") + kernel +
                "' does not support " + getName(dtype) + " tensors");
  }
}

/// A tensor as the product addresses it: dims and their strides, in
/// elements.
struct StridedDims {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

/// A tensor of `shape` stored row-major.
StridedDims getRowMajor(const Shape &shape) {
  StridedDims tensor;
  tensor.rank = shape.rank;
  int64_t stride = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    tensor.dims[d] = shape.dims[d];
    tensor.strides[d] = stride;
    stride *= shape.dims[d];
  }
  return tensor;
}

/// A row-major tensor of `shape` read through `permutation` (null: none),
/// as slapo.permute reads its input: dim i is stored dim permutation[i].
StridedDims permuteDims(const Shape &shape, const int64_t *permutation) {
  StridedDims stored = getRowMajor(shape), permuted = stored;
  for (int d = 0; permutation && d < shape.rank; ++d) {
    permuted.dims[d] = stored.dims[permutation[d]];
    permuted.strides[d] = stored.strides[permutation[d]];
  }
  return permuted;
}

/// The tensor that permute(tensor, permutation) (null: none) stores
/// row-major as `shape`: stored dim i is its dim permutation[i].
StridedDims unpermuteDims(const Shape &shape, const int64_t *permutation) {
  StridedDims stored = getRowMajor(shape), logical = stored;
  for (int d = 0; permutation && d < shape.rank; ++d) {
    logical.dims[permutation[d]] = stored.dims[d];
    logical.strides[permutation[d]] = stored.strides[d];
  }
  return logical;
}

/// `tensor` with leading dims of size 1 up to `rank`.
StridedDims padDims(const StridedDims &tensor, int rank) {
  StridedDims padded;
  padded.rank = rank;
  int shift = rank - tensor.rank;
  for (int d = 0; d < rank; ++d) {
    padded.dims[d] = d < shift ? 1 : tensor.dims[d - shift];
    padded.strides[d] = d < shift ? 0 : tensor.strides[d - shift];
  }
  return padded;
}

Shape getShape(const StridedDims &tensor) {
  Shape shape;
  shape.rank = tensor.rank;
  for (int d = 0; d < tensor.rank; ++d)
    shape.dims[d] = tensor.dims[d];
  return shape;
}

/// A logical matrix [rows, columns] with its strides.
struct Matrix {
  int64_t rows, columns, rowStride, columnStride;

  Matrix transposed() const { return {columns, rows, columnStride, rowStride}; }
};

/// The last two dims of `tensor` as a matrix.
Matrix getMatrix(const StridedDims &tensor) {
  int r = tensor.rank;
  return {tensor.dims[r - 2], tensor.dims[r - 1], tensor.strides[r - 2],
          tensor.strides[r - 1]};
}

/// A matrix as cuBLASLt stores it: column-major [rows, columns] with
/// leading dimension ld, read transposed or not.
struct Layout {
  int64_t rows, columns, ld;
  bool transposed;
};

/// `matrix` as a column-major matrix (transposed = false), null unless its
/// rows are adjacent in memory. A size-1 dim's stride does not matter.
std::optional<Layout> getColumnMajor(const Matrix &matrix) {
  if (matrix.rows != 1 && matrix.rowStride != 1)
    return std::nullopt;
  int64_t ld = matrix.columns == 1 ? matrix.rows : matrix.columnStride;
  if (ld < std::max<int64_t>(matrix.rows, 1))
    return std::nullopt; // cuBLASLt refuses overlapping columns
  return Layout{matrix.rows, matrix.columns, ld, false};
}

/// `matrix` as cuBLASLt can read an operand: column-major as it is, or its
/// transpose column-major and read transposed.
std::optional<Layout> getOperandLayout(const Matrix &matrix) {
  if (std::optional<Layout> layout = getColumnMajor(matrix))
    return layout;
  std::optional<Layout> layout = getColumnMajor(matrix.transposed());
  if (layout)
    layout->transposed = true;
  return layout;
}

/// A batch dim of the product: its size and each operand's stride.
struct BatchDim {
  int64_t size;
  int64_t lhs, rhs, out;
};

/// The batch dims (all but the last two) of the out-rank views, size-1
/// dims dropped (a broadcast operand's stride 0) and dims that every
/// operand steps over as one merged, outermost first.
std::vector<BatchDim> getBatchDims(const StridedDims &lhs,
                                   const StridedDims &rhs,
                                   const StridedDims &out) {
  std::vector<BatchDim> dims;
  for (int d = 0; d < out.rank - 2; ++d) {
    int64_t size = out.dims[d];
    if (size == 1)
      continue;
    BatchDim dim{size, lhs.dims[d] == 1 ? 0 : lhs.strides[d],
                 rhs.dims[d] == 1 ? 0 : rhs.strides[d], out.strides[d]};
    if (!dims.empty()) {
      BatchDim &previous = dims.back();
      if (previous.lhs == dim.lhs * size && previous.rhs == dim.rhs * size &&
          previous.out == dim.out * size) {
        previous.size *= size;
        previous.lhs = dim.lhs;
        previous.rhs = dim.rhs;
        previous.out = dim.out;
        continue;
      }
    }
    dims.push_back(dim);
  }
  return dims;
}

/// The largest power of two up to 256 that divides the address and every
/// byte stride: the alignment of every matrix a batched product touches.
uint32_t getAlignment(const void *data, std::initializer_list<int64_t> strides,
                      size_t width) {
  uint64_t bits = reinterpret_cast<uintptr_t>(data) | 256;
  for (int64_t stride : strides)
    bits |= uint64_t(stride) * width;
  return static_cast<uint32_t>(bits & -bits);
}

/// One operand of a cuBLASLt call.
struct Operand {
  const void *data;
  cudaDataType_t type;
  Layout layout;
  int64_t batchStride;
  uint32_t alignment;
};

void setLayoutBatch(cublasLtMatrixLayout_t layout, int32_t count,
                    int64_t stride) {
  checkCublas(
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
      "cublasLtMatrixLayoutSetAttribute(batch count)");
  checkCublas(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                  sizeof stride),
              "cublasLtMatrixLayoutSetAttribute(batch stride)");
}

cublasLtMatrixLayout_t createLayout(const Operand &operand, int32_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  checkCublas(
      cublasLtMatrixLayoutCreate(&layout, operand.type, operand.layout.rows,
                                 operand.layout.columns, operand.layout.ld),
      "cublasLtMatrixLayoutCreate");
  if (batch > 1)
    setLayoutBatch(layout, batch, operand.batchStride);
  return layout;
}

/// A bias for the epilogue: added to every column of D (every row of the
/// row-major result).
struct EpilogueBias {
  const void *data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
};

/// The plan for D = A * B (column-major, A and B possibly transposed),
/// `batch` products at once: made on first use. Null when cuBLASLt's
/// heuristic offers no algorithm (then the caller drops the epilogue).
const MatmulPlan *getPlan(Context &ctx, const Operand &a, const Operand &b,
                          const Operand &d, int32_t batch,
                          const EpilogueBias &bias) {
  Context::Impl &impl = ctx.getImpl();
  std::vector<int64_t> key = {batch, bool(bias.data), bias.type,
                              bias.data ? getAlignment(bias.data, {}, 1) : 0};
  for (const Operand *operand : {&a, &b, &d})
    key.insert(key.end(),
               {operand->type, operand->layout.rows, operand->layout.columns,
                operand->layout.ld, operand->layout.transposed,
                operand->batchStride, operand->alignment});
  auto found = impl.matmulPlans.find(key);
  if (found != impl.matmulPlans.end())
    return found->second.operation ? &found->second : nullptr;

  MatmulPlan plan;
  cublasLtMatmulPreference_t preference = nullptr;
  // Destroys what was made so far; safe to call twice.
  auto release = [&] {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    preference = nullptr;
    destroyPlan(plan);
  };
  try {
    checkCublas(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F,
                                         CUDA_R_32F),
                "cublasLtMatmulDescCreate");
    for (auto [attribute, operand] :
         {std::pair{CUBLASLT_MATMUL_DESC_TRANSA, &a},
          std::pair{CUBLASLT_MATMUL_DESC_TRANSB, &b}}) {
      cublasOperation_t operation =
          operand->layout.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
      checkCublas(cublasLtMatmulDescSetAttribute(plan.operation, attribute,
                                                 &operation, sizeof operation),
                  "cublasLtMatmulDescSetAttribute(transpose)");
    }
    if (bias.data) {
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      checkCublas(cublasLtMatmulDescSetAttribute(plan.operation,
                                                 CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                 &epilogue, sizeof epilogue),
                  "cublasLtMatmulDescSetAttribute(epilogue)");
      int32_t biasType = bias.type;
      checkCublas(cublasLtMatmulDescSetAttribute(
                      plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                      &biasType, sizeof biasType),
                  "cublasLtMatmulDescSetAttribute(bias type)");
      // The heuristic reads the pointer's alignment.
      checkCublas(cublasLtMatmulDescSetAttribute(
                      plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                      &bias.data, sizeof bias.data),
                  "cublasLtMatmulDescSetAttribute(bias)");
    }
    plan.a = createLayout(a, batch);
    plan.b = createLayout(b, batch);
    plan.d = createLayout(d, batch);

    checkCublas(cublasLtMatmulPreferenceCreate(&preference),
                "cublasLtMatmulPreferenceCreate");
    size_t workspaceBytes = Context::Impl::kWorkspaceBytes;
    checkCublas(cublasLtMatmulPreferenceSetAttribute(
                    preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &workspaceBytes, sizeof workspaceBytes),
                "cublasLtMatmulPreferenceSetAttribute(workspace)");
    for (auto [attribute, alignment] :
         {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a.alignment},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b.alignment},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d.alignment},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d.alignment}})
      checkCublas(cublasLtMatmulPreferenceSetAttribute(
                      preference, attribute, &alignment, sizeof alignment),
                  "cublasLtMatmulPreferenceSetAttribute(alignment)");

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        impl.lt, plan.operation, plan.a, plan.b, plan.d, plan.d, preference, 1,
        &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    preference = nullptr;
    // No algorithm is either status.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED)
      checkCublas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
      release();
      if (bias.data) {
        // Remembered as an empty plan, so that the heuristic is asked once.
        impl.matmulPlans.emplace(key, MatmulPlan());
        return nullptr;
      }
      int64_t k = a.layout.transposed ? a.layout.rows : a.layout.columns;
      throw Error("cuBLASLt has no algorithm for the column-major product [" +
                  std::to_string(d.layout.rows) + ", " +
                  std::to_string(d.layout.columns) + "] with K " +
                  std::to_string(k) + ", batch " + std::to_string(batch));
    }
    plan.algorithm = result.algo;
  } catch (...) {
    release();
    throw;
  }
  return &impl.matmulPlans.emplace(key, plan).first->second;
}

/// The product out[M, N] = lhs[M, K] * rhs[K, N] over `batch` (outermost
/// first), the matrices addressed as given; each fits a cuBLASLt layout
/// (out's or its transpose column-major).
struct Product {
  const void *lhs, *rhs;
  void *out;
  DType inputType, outType;
  Matrix lhsMatrix, rhsMatrix, outMatrix;
  std::vector<BatchDim> batch;
};

/// Runs `product`; `bias` (linear only: out a contiguous [rows, N], no
/// batch; out's dtype; may be null) is added to every row of out. With
/// `accumulate` (no bias) the product is added to out (beta = 1).
void runProduct(Context &ctx, Product product, const Tensor &bias,
                bool accumulate = false) {
  // A right operand shared by a batch of row-major lhs and out rows folds
  // into M: one GEMM over the batch's rows.
  while (!product.batch.empty()) {
    const BatchDim &inner = product.batch.back();
    const Matrix &lhs = product.lhsMatrix, &out = product.outMatrix;
    bool folds = inner.rhs == 0 &&
                 (lhs.columns == 1 || lhs.columnStride == 1) &&
                 (out.columns == 1 || out.columnStride == 1) &&
                 inner.lhs == lhs.rowStride * lhs.rows &&
                 inner.out == out.rowStride * out.rows;
    if (!folds)
      break;
    product.lhsMatrix.rows *= inner.size;
    product.outMatrix.rows *= inner.size;
    product.batch.pop_back();
  }

  // out^T = rhs^T * lhs^T where out's rows are contiguous, else
  // out = lhs * rhs (out's columns contiguous).
  const void *aData = product.rhs, *bData = product.lhs;
  Matrix aMatrix = product.rhsMatrix.transposed();
  Matrix bMatrix = product.lhsMatrix.transposed();
  std::optional<Layout> dLayout =
      getColumnMajor(product.outMatrix.transposed());
  bool swapped = !dLayout;
  if (swapped) {
    std::swap(aData, bData);
    aMatrix = product.lhsMatrix;
    bMatrix = product.rhsMatrix;
    dLayout = getColumnMajor(product.outMatrix);
  }
  std::optional<Layout> aLayout = getOperandLayout(aMatrix);
  std::optional<Layout> bLayout = getOperandLayout(bMatrix);
  if (!aLayout || !bLayout || !dLayout)
    throw Error("matmul: an operand's strides fit no cuBLASLt layout");

  // cuBLASLt's batch is the innermost batch dim; outer ones are a loop.
  BatchDim inner =
      product.batch.empty() ? BatchDim{1, 0, 0, 0} : product.batch.back();
  std::vector<BatchDim> outer = product.batch;
  if (!outer.empty())
    outer.pop_back();
  int64_t aStride = swapped ? inner.lhs : inner.rhs;
  int64_t bStride = swapped ? inner.rhs : inner.lhs;
  int64_t launches = 1;
  // The operands' strides between the loop's launches.
  std::vector<int64_t> aLoop, bLoop, dLoop;
  for (const BatchDim &dim : outer) {
    launches *= dim.size;
    aLoop.push_back(swapped ? dim.lhs : dim.rhs);
    bLoop.push_back(swapped ? dim.rhs : dim.lhs);
    dLoop.push_back(dim.out);
  }
  auto alignmentOf = [](const void *data, const std::vector<int64_t> &loop,
                        int64_t batchStride, DType dtype) {
    uint32_t alignment = getAlignment(data, {batchStride}, getSize(dtype));
    for (int64_t stride : loop)
      alignment =
          std::min(alignment, getAlignment(data, {stride}, getSize(dtype)));
    return alignment;
  };
  cudaDataType_t inputType = getDataType("matmul", product.inputType);
  cudaDataType_t outType = getDataType("matmul", product.outType);
  Operand a{aData, inputType, *aLayout, aStride,
            alignmentOf(aData, aLoop, aStride, product.inputType)};
  Operand b{bData, inputType, *bLayout, bStride,
            alignmentOf(bData, bLoop, bStride, product.inputType)};
  Operand d{product.out, outType, *dLayout, inner.out,
            alignmentOf(product.out, dLoop, inner.out, product.outType)};
  auto batch = static_cast<int32_t>(inner.size);

  // The epilogue adds a bias along D's rows (out's columns, unswapped);
  // only to f32 results, in the f32 sum (see the file comment).
  EpilogueBias epilogue;
  if (bias && !swapped && product.outType == DType::F32)
    epilogue = {bias.data, outType};
  const MatmulPlan *plan = getPlan(ctx, a, b, d, batch, epilogue);
  if (!plan) { // no algorithm with the epilogue
    epilogue = {};
    plan = getPlan(ctx, a, b, d, batch, epilogue);
  }
  if (epilogue.data)
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &epilogue.data, sizeof epilogue.data),
                "cublasLtMatmulDescSetAttribute(bias)");

  float alpha = 1, beta = accumulate ? 1 : 0;
  if (bias && !epilogue.data) {
    // out = product + 1 * out, out starting as the bias in every row.
    broadcast(ctx, bias,
              Tensor(product.out, product.outType,
                     {product.outMatrix.rows, product.outMatrix.columns}));
    beta = 1;
  }
  Context::Impl &impl = ctx.getImpl();
  size_t aWidth = getSize(product.inputType), dWidth = getSize(product.outType);
  for (int64_t launch = 0; launch < launches; ++launch) {
    // The launch's offsets, the last outer dim fastest.
    int64_t aOffset = 0, bOffset = 0, dOffset = 0;
    for (int64_t i = int64_t(outer.size()) - 1, rest = launch; i >= 0; --i) {
      int64_t position = rest % outer[i].size;
      rest /= outer[i].size;
      aOffset += position * aLoop[i];
      bOffset += position * bLoop[i];
      dOffset += position * dLoop[i];
    }
    void *dPointer = static_cast<char *>(product.out) + dOffset * dWidth;
    checkCublas(
        cublasLtMatmul(
            impl.lt, plan->operation, &alpha,
            static_cast<const char *>(aData) + aOffset * aWidth, plan->a,
            static_cast<const char *>(bData) + bOffset * aWidth, plan->b, &beta,
            dPointer, plan->d, dPointer, plan->d, &plan->algorithm,
            impl.workspace, Context::Impl::kWorkspaceBytes, ctx.getStream()),
        "cublasLtMatmul");
  }
}

/// Checks the contraction's dtypes: f32 operands give f32, bf16 operands
/// bf16 or f32.
void checkTypes(const char *kernel, DType lhs, DType rhs, DType out) {
  getDataType(kernel, lhs);
  getDataType(kernel, out);
  if (lhs != rhs || (lhs == DType::F32 && out != DType::F32))
    throw Error(std::string("the CUDA kernel '") + kernel + "' does not " +
                "support " + getName(lhs) + " by " + getName(rhs) + " into " +
                getName(out));
}

} // namespace

void linear(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out) {
  checkTypes("linear", input.dtype, weight.dtype, out.dtype);
  if (out.getNumElements() == 0)
    return;
  int64_t k = input.shape.dims[input.getRank() - 1];
  int64_t n = weight.shape.dims[0];
  int64_t m = out.getNumElements() / n;
  if (k == 0) { // an empty sum: the bias alone
    if (bias)
      broadcast(ctx, bias, out);
    else
      fill(ctx, out, 0);
    return;
  }
  // The bias in out's dtype, as the epilogue and C read it (an f32 bias of
  // a bf16 result is rounded to bf16 first).
  Tensor outBias = bias;
  if (bias && bias.dtype != out.dtype) {
    outBias =
        Tensor(ctx.getImpl().getScratch(
                   Scratch::MatmulRhs,
                   bias.getNumElements() * getSize(out.dtype), ctx.getStream()),
               out.dtype, bias.shape);
    cast(ctx, bias, outBias);
  }
  // weight [N, K] row-major is rhs [K, N] with strides {1, K}.
  Product product{input.data,         weight.data,        out.data,
                  input.dtype,        out.dtype,          Matrix{m, k, k, 1},
                  Matrix{k, n, 1, k}, Matrix{m, n, n, 1}, {}};
  runProduct(ctx, product, outBias);
}

namespace {

/// out = lhs x rhs, or out += lhs x rhs where `accumulate`.
void contract(Context &ctx, const Tensor &lhs, const Tensor &rhs,
              const Tensor &out, const MatmulPermutations &permutations,
              bool accumulate) {
  checkTypes("matmul", lhs.dtype, rhs.dtype, out.dtype);
  int rank = out.getRank();
  StridedDims lhsDims = permuteDims(lhs.shape, permutations.lhs);
  StridedDims rhsDims = permuteDims(rhs.shape, permutations.rhs);
  StridedDims outDims = unpermuteDims(out.shape, permutations.result);
  if (out.getNumElements() == 0)
    return;
  if (lhsDims.dims[lhsDims.rank - 1] == 0) { // an empty sum
    if (!accumulate)
      fill(ctx, out, 0);
    return;
  }
  cudaStream_t stream = ctx.getStream();
  Context::Impl &impl = ctx.getImpl();
  // An operand whose matrix fits no layout is read from a contiguous copy.
  const void *lhsData = lhs.data, *rhsData = rhs.data;
  auto makeReadable = [&](const Tensor &operand, const int64_t *permutation,
                          StridedDims &dims, const void *&data, Scratch slot) {
    if (getOperandLayout(getMatrix(dims)))
      return;
    Shape shape = getShape(dims);
    Tensor contiguous(impl.getScratch(slot, operand.getBytes(), stream),
                      operand.dtype, shape);
    permute(ctx, operand, contiguous, permutation);
    dims = getRowMajor(shape);
    data = contiguous.data;
  };
  makeReadable(lhs, permutations.lhs, lhsDims, lhsData, Scratch::MatmulLhs);
  makeReadable(rhs, permutations.rhs, rhsDims, rhsData, Scratch::MatmulRhs);
  // A result that fits no layout is computed contiguous, then permuted.
  Matrix outMatrix = getMatrix(outDims);
  bool outFits =
      getColumnMajor(outMatrix.transposed()) || getColumnMajor(outMatrix);
  Tensor product = out;
  if (!outFits && accumulate)
    throw Error("addMatmul: the result's strides fit no cuBLASLt layout");
  if (!outFits) {
    product =
        Tensor(impl.getScratch(Scratch::MatmulResult, out.getBytes(), stream),
               out.dtype, getShape(outDims));
    outDims = getRowMajor(product.shape);
  }
  StridedDims lhsPadded = padDims(lhsDims, rank);
  StridedDims rhsPadded = padDims(rhsDims, rank);
  runProduct(ctx,
             Product{lhsData, rhsData, product.data, lhs.dtype, out.dtype,
                     getMatrix(lhsPadded), getMatrix(rhsPadded),
                     getMatrix(outDims),
                     getBatchDims(lhsPadded, rhsPadded, outDims)},
             Tensor(), accumulate);
  if (!outFits)
    permute(ctx, product, out, permutations.result);
}

} // namespace

void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out, const MatmulPermutations &permutations) {
  contract(ctx, lhs, rhs, out, permutations, false);
}

void addMatmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
               const Tensor &out, const MatmulPermutations &permutations) {
  if (out.dtype != DType::F32)
    throw Error(std::string("addMatmul: the sum is f32, not ") +
                getName(out.dtype));
  contract(ctx, lhs, rhs, out, permutations, true);
}

} // namespace slapo::rt::cuda
