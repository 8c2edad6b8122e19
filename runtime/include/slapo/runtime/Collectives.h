//===- Collectives.h - the collectives generated code calls -----*- C++ -*-===//
//
// Tensor-level collectives over a Communicator, with the meaning of the
// slapo dialect's collective ops, for every backend: `ctx` is the backend's
// Context (cpu::Context, cuda::Context), whose kernels stage the data, and
// the group's memory is that device's (Device::createCommunicator). The
// definitions are in runtime/comm/CollectivesImpl.h, instantiated by each
// backend. Shapes and dtypes are checked
// before any communication, so a mismatch throws Error on every rank alike
// instead of leaving peers waiting. Staging (buckets, blocks along a
// non-leading dim) uses the group's scratch buffer (Communicator::getScratch).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_COLLECTIVES_H
#define SLAPO_RUNTIME_COLLECTIVES_H

#include "slapo/runtime/Comm.h"
#include "slapo/runtime/Tensor.h"

namespace slapo::rt {

/// outputs[i] = the sum over the group of inputs[i] (divided by the group
/// size if `mean`), for `count` F32 tensors reduced together as one bucket:
/// one collective call for all of them. outputs[i] may be inputs[i] (in
/// place). A group of one copies (or, in place, does nothing). Outputs that
/// lie back to back in memory (as a planned bucket does) are reduced where
/// they lie; other buckets are staged in the group's scratch buffer.
template <class Context>
void allReduce(Context &ctx, Communicator &group, const Tensor *inputs,
               const Tensor *outputs, int count, bool mean);
/// output = the group's `input`s concatenated along `dim` in group-rank order
/// (output.shape[dim] = size * input.shape[dim]).
template <class Context>
void allGather(Context &ctx, Communicator &group, const Tensor &input,
               const Tensor &output, int dim);
/// output = block getRank() along `dim` of the group's elementwise sum of
/// `input` (input.shape[dim] = size * output.shape[dim]). F32, F64, I64.
template <class Context>
void reduceScatter(Context &ctx, Communicator &group, const Tensor &input,
                   const Tensor &output, int dim);
/// output = block getRank() along `dim` of `input` (no communication: every
/// rank holds the same input).
template <class Context>
void scatter(Context &ctx, Communicator &group, const Tensor &input,
             const Tensor &output, int dim);

/// Pipeline stages' point to point messages (slapo.stage_send and
/// slapo.stage_recv): `input`'s bytes go to group rank `peer`, whose
/// recvTensor from this rank writes them into its `output` of the same
/// dtype and shape. Tensors are contiguous: no staging.
template <class Context>
void sendTensor(Context &ctx, Communicator &group, const Tensor &input,
                int peer);
template <class Context>
void recvTensor(Context &ctx, Communicator &group, const Tensor &output,
                int peer);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_COLLECTIVES_H
