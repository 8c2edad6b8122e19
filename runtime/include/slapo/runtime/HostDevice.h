//===- HostDevice.h - functions both backends compile ------------*- C++
//-*-===//
//
// SLAPO_HOST_DEVICE marks an inline function that CUDA kernels call too, so
// that the CPU and CUDA backends compute the same thing from one definition
// (random bits, pooling windows).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_HOSTDEVICE_H
#define SLAPO_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define SLAPO_HOST_DEVICE __host__ __device__
#else
#define SLAPO_HOST_DEVICE
#endif

#endif // SLAPO_RUNTIME_HOSTDEVICE_H
