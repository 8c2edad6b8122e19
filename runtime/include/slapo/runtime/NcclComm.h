//===- NcclComm.h - a group of ranks on CUDA devices ------------*- C++ -*-===//
//
// The communicator of a CUDA backend: the collectives of Communicator over
// NCCL, on device memory. It lives in libslapo_runtime_nccl, built only where
// CUDA and NCCL are installed, so that CPU rank programs never link CUDA. Like
// Comm.h this header includes neither nccl.h nor CUDA's headers.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_NCCLCOMM_H
#define SLAPO_RUNTIME_NCCLCOMM_H

#include "slapo/runtime/Comm.h"

#include <memory>

namespace slapo::rt {

/// An NCCL communicator of the ranks of `group` (in its rank order) on CUDA
/// device `device` of this process; every member of `group` must call it.
/// Group rank 0 creates NCCL's unique id and broadcasts it over `group` (an
/// MPI or local communicator), then every rank joins. NCCL allows one rank
/// per device in a communicator.
///
/// The result's collectives take device pointers and run on a CUDA stream
/// the communicator owns, and synchronise that stream before they return:
/// the data is ready for any stream afterwards, and the caller must have
/// finished writing the inputs (e.g. synchronised its own stream) before the
/// call. Its broadcast() also runs on the device. Every failing CUDA or NCCL
/// call throws Error naming the call and CUDA's or NCCL's error text.
/// getScratch() stays host memory, so Collectives.h (which stages on the
/// host) is not for this communicator.
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &group,
                                                     int device);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_NCCLCOMM_H
