//===- NcclCommunicator.cpp - a group of ranks over NCCL ------------------===//
//
// The collectives of a group on CUDA devices: one NCCL communicator and one
// CUDA stream, bootstrapped over the group's MPI (or local) communicator.
//
//===----------------------------------------------------------------------===//
#include "CommInternal.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/NcclComm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

namespace slapo::rt {

namespace {

/// Throws "<operation> failed: <CUDA's text>" unless `status` is success.
void checkCuda(cudaError_t status, const std::string &operation) {
  if (status != cudaSuccess)
    throw Error(operation + " failed: " + cudaGetErrorString(status));
}

/// Throws "<operation> failed: <NCCL's text>" unless `status` is success.
void checkNccl(ncclResult_t status, const std::string &operation) {
  if (status != ncclSuccess)
    throw Error(operation + " failed: " + ncclGetErrorString(status));
}

/// The NCCL type of one element, for moving elements (any dtype) and for
/// ncclSum (the summable dtypes).
ncclDataType_t getNcclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::I8:
    return ncclInt8;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  case DType::Bool:
    return ncclUint8;
  }
  throw Error("unknown dtype in a collective");
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &group, int device)
      : rank(group.getRank()), size(group.getSize()) {
    checkCuda(cudaSetDevice(device),
              "cudaSetDevice(" + std::to_string(device) + ")");
    // Non-blocking: the collectives neither wait for nor hold up work on the
    // legacy default stream; callers order them by synchronising instead.
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
    ncclUniqueId id;
    try {
      // Should rank 0 fail here, its peers wait in the broadcast until the
      // driver's ProcessMesh::abort() ends the job.
      if (rank == 0)
        checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      group.broadcast(&id, sizeof(id), 0);
      checkNccl(ncclCommInitRank(&comm, size, id, rank),
                "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
                    std::to_string(size) + ")");
    } catch (...) {
      // The destructor does not run for a constructor that throws.
      cudaStreamDestroy(stream);
      throw;
    }
  }
  ~NcclCommunicator() override {
    // Errors are ignored: a destructor cannot report them, and after a
    // failure the job ends anyway.
    ncclCommDestroy(comm);
    cudaStreamDestroy(stream);
  }

  int getRank() const override { return rank; }
  int getSize() const override { return size; }

  void allReduceSum(void *data, int64_t count, DType dtype) override {
    checkSummable(dtype, "all-reduce");
    ScopedTimer timer(commSeconds);
    checkNccl(ncclAllReduce(data, data, count, getNcclType(dtype), ncclSum,
                            comm, stream),
              "ncclAllReduce");
    synchronize("ncclAllReduce");
  }

  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    ScopedTimer timer(commSeconds);
    checkNccl(
        ncclAllGather(local, gathered, count, getNcclType(dtype), comm, stream),
        "ncclAllGather");
    synchronize("ncclAllGather");
  }

  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    checkSummable(dtype, "reduce-scatter");
    ScopedTimer timer(commSeconds);
    checkNccl(ncclReduceScatter(full, local, count, getNcclType(dtype), ncclSum,
                                comm, stream),
              "ncclReduceScatter");
    synchronize("ncclReduceScatter");
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    checkBroadcastRoot(root, size);
    checkNccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm, stream),
              "ncclBroadcast");
    synchronize("ncclBroadcast");
  }

private:
  /// Errors of the kernels a call enqueued surface here.
  void synchronize(const char *operation) {
    checkCuda(cudaStreamSynchronize(stream),
              std::string("cudaStreamSynchronize after ") + operation);
  }

  int rank;
  int size;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &group,
                                                     int device) {
  return std::make_unique<NcclCommunicator>(group, device);
}

} // namespace slapo::rt
