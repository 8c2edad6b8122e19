//===- Communicators.h - groups of ranks over a GPU's memory -----*- C++ -*-===//
//
// Private to runtime/cuda (and its tests): the communicators a cuda::Context
// gives the mesh's groups (Device::createCommunicator). Each takes and
// returns device pointers, runs on the context's stream (so it is ordered
// with the kernels around it), and stages the collectives' packing in
// device memory (getScratch).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_COMMUNICATORS_H
#define SLAPO_RUNTIME_CUDA_COMMUNICATORS_H

#include "slapo/runtime/Comm.h"
#include "slapo/runtime/cuda/Context.h"

#include <memory>

namespace slapo::rt::cuda {

/// A group of one rank: every collective is a copy on the device.
std::unique_ptr<Communicator> createLocalCommunicator(Context &ctx);
/// The ranks of `hostGroup` over NCCL, bootstrapped over `hostGroup` (one
/// rank per GPU: NCCL refuses two ranks of a communicator on one GPU).
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &hostGroup,
                                                     Context &ctx);
/// The ranks of `hostGroup` (MPI) with every message staged through host
/// memory: for ranks that share a GPU.
std::unique_ptr<Communicator>
createHostStagedCommunicator(Communicator &hostGroup, Context &ctx);

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_COMMUNICATORS_H
