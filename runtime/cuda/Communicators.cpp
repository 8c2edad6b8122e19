//===- Communicators.cpp - groups of ranks over a GPU's memory ------------===//
//
// Three communicators over device memory, all on the context's stream: a
// group of one (copies, queued like kernels), NCCL, and MPI staged through
// host memory. The NCCL and staged calls return once the stream has run
// them, so that errors surface at the collective that caused them and the
// time in getCommSeconds() (getPointToPointSeconds() for send and recv) is
// the time they took.
//
//===----------------------------------------------------------------------===//
#include "Communicators.h"
#include "../comm/CommInternal.h"
#include "slapo/runtime/Error.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <vector>

namespace slapo::rt::cuda {

namespace {

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

/// A communicator over the device memory of `ctx`: its scratch is device
/// memory, and its calls synchronize the context's stream.
class DeviceCommunicator : public Communicator {
public:
  explicit DeviceCommunicator(Context &ctx) : ctx(ctx) {}
  ~DeviceCommunicator() override { ctx.release(scratch); }

  std::byte *getScratch(size_t bytes) override {
    if (bytes > scratchBytes) {
      ctx.release(scratch);
      scratch = nullptr;
      scratch = ctx.allocate(bytes);
      scratchBytes = bytes;
    }
    return static_cast<std::byte *>(scratch);
  }

protected:
  /// Errors of the work a call enqueued surface here.
  void synchronize(const char *operation) {
    checkCuda(cudaStreamSynchronize(ctx.getStream()),
              (std::string("cudaStreamSynchronize after ") + operation).c_str());
  }

  Context &ctx;

private:
  void *scratch = nullptr;
  size_t scratchBytes = 0;
};

/// A group of one rank.
class LocalCommunicator final : public DeviceCommunicator {
public:
  using DeviceCommunicator::DeviceCommunicator;
  int getRank() const override { return 0; }
  int getSize() const override { return 1; }

  void allReduceSum(void *, int64_t, DType dtype) override {
    checkSummable(dtype, "all-reduce");
  }
  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    copy(local, gathered, count * rt::getSize(dtype));
  }
  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    checkSummable(dtype, "reduce-scatter");
    copy(full, local, count * rt::getSize(dtype));
  }
  void broadcast(void *, int64_t, int root) override {
    checkBroadcastRoot(root, 1);
  }
  void send(const void *, int64_t, int peer) override {
    checkPeer(peer, 0, 1, "send");
  }
  void recv(void *, int64_t, int peer) override {
    checkPeer(peer, 0, 1, "recv");
  }

private:
  void copy(const void *from, void *to, size_t bytes) {
    if (from == to)
      return;
    checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice,
                              ctx.getStream()),
              "cudaMemcpyAsync");
  }
};

/// A group of several ranks, one GPU each.
class NcclCommunicator final : public DeviceCommunicator {
public:
  NcclCommunicator(Communicator &group, Context &ctx)
      : DeviceCommunicator(ctx), rank(group.getRank()),
        size(group.getSize()) {
    ncclUniqueId id;
    // Should rank 0 fail here, its peers wait in the broadcast until the
    // driver's ProcessMesh::abort() ends the job.
    if (rank == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    group.broadcast(&id, sizeof(id), 0);
    checkNccl(ncclCommInitRank(&comm, size, id, rank),
              "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
                  std::to_string(size) + ")");
  }
  ~NcclCommunicator() override {
    // Errors are ignored: a destructor cannot report them, and after a
    // failure the job ends anyway.
    ncclCommDestroy(comm);
  }

  int getRank() const override { return rank; }
  int getSize() const override { return size; }

  void allReduceSum(void *data, int64_t count, DType dtype) override {
    checkSummable(dtype, "all-reduce");
    ScopedTimer timer(commSeconds);
    checkNccl(ncclAllReduce(data, data, count, getNcclType(dtype), ncclSum,
                            comm, ctx.getStream()),
              "ncclAllReduce");
    synchronize("ncclAllReduce");
  }

  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    ScopedTimer timer(commSeconds);
    checkNccl(
        ncclAllGather(local, gathered, count, getNcclType(dtype), comm,
                      ctx.getStream()),
        "ncclAllGather");
    synchronize("ncclAllGather");
  }

  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    checkSummable(dtype, "reduce-scatter");
    ScopedTimer timer(commSeconds);
    checkNccl(ncclReduceScatter(full, local, count, getNcclType(dtype), ncclSum,
                                comm, ctx.getStream()),
              "ncclReduceScatter");
    synchronize("ncclReduceScatter");
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    checkBroadcastRoot(root, size);
    checkNccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm,
                            ctx.getStream()),
              "ncclBroadcast");
    synchronize("ncclBroadcast");
  }

  void send(const void *data, int64_t bytes, int peer) override {
    checkPeer(peer, rank, size, "send");
    ScopedTimer timer(pointToPointSeconds);
    checkNccl(ncclSend(data, bytes, ncclUint8, peer, comm, ctx.getStream()),
              "ncclSend");
    synchronize("ncclSend");
  }

  void recv(void *data, int64_t bytes, int peer) override {
    checkPeer(peer, rank, size, "recv");
    ScopedTimer timer(pointToPointSeconds);
    checkNccl(ncclRecv(data, bytes, ncclUint8, peer, comm, ctx.getStream()),
              "ncclRecv");
    synchronize("ncclRecv");
  }

private:
  int rank;
  int size;
  ncclComm_t comm = nullptr;
};

/// A group of several ranks over MPI (`host`), each message copied to host
/// memory and back: ranks that share a GPU, where NCCL refuses to run. The
/// host group times the message passing.
class HostStagedCommunicator final : public DeviceCommunicator {
public:
  HostStagedCommunicator(Communicator &host, Context &ctx)
      : DeviceCommunicator(ctx), host(host) {}
  int getRank() const override { return host.getRank(); }
  int getSize() const override { return host.getSize(); }

  void allReduceSum(void *data, int64_t count, DType dtype) override {
    size_t bytes = count * rt::getSize(dtype);
    ctx.copyToHost(stage(bytes), data, bytes);
    host.allReduceSum(staged.data(), count, dtype);
    ctx.copyToDevice(data, staged.data(), bytes);
  }
  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    size_t bytes = count * rt::getSize(dtype);
    std::byte *buffer = stage(bytes * (getSize() + 1));
    ctx.copyToHost(buffer, local, bytes);
    host.allGather(buffer, buffer + bytes, count, dtype);
    ctx.copyToDevice(gathered, buffer + bytes, bytes * getSize());
  }
  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    size_t bytes = count * rt::getSize(dtype);
    std::byte *buffer = stage(bytes * (getSize() + 1));
    ctx.copyToHost(buffer, full, bytes * getSize());
    host.reduceScatterSum(buffer, buffer + bytes * getSize(), count, dtype);
    ctx.copyToDevice(local, buffer + bytes * getSize(), bytes);
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    ctx.copyToHost(stage(bytes), data, bytes);
    host.broadcast(staged.data(), bytes, root);
    ctx.copyToDevice(data, staged.data(), bytes);
  }
  void send(const void *data, int64_t bytes, int peer) override {
    ctx.copyToHost(stage(bytes), data, bytes);
    host.send(staged.data(), bytes, peer);
  }
  void recv(void *data, int64_t bytes, int peer) override {
    host.recv(stage(bytes), bytes, peer);
    ctx.copyToDevice(data, staged.data(), bytes);
  }

private:
  /// The host staging buffer, grown to `bytes`.
  std::byte *stage(size_t bytes) {
    if (staged.size() < bytes)
      staged.resize(bytes);
    return staged.data();
  }

  Communicator &host;
  std::vector<std::byte> staged;
};

} // namespace

std::unique_ptr<Communicator> createLocalCommunicator(Context &ctx) {
  return std::make_unique<LocalCommunicator>(ctx);
}

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &hostGroup,
                                                     Context &ctx) {
  return std::make_unique<NcclCommunicator>(hostGroup, ctx);
}

std::unique_ptr<Communicator>
createHostStagedCommunicator(Communicator &hostGroup, Context &ctx) {
  return std::make_unique<HostStagedCommunicator>(hostGroup, ctx);
}

} // namespace slapo::rt::cuda
