//===- NvrtcUnavailable.cpp - NVRTC calls that always fail ----------------===//
//
// cuDNN's frontend (1.32) compiles one experimental engine, Blackwell's
// fused RMS norm and SiLU (cudnn_frontend/experimental/
// sm100_rms_norm_silu_engine.h), at run time with NVRTC, and its plans.h
// includes that engine whatever a program builds, so CudnnAttention.cpp
// refers to NVRTC although its attention graphs never reach that engine.
// Rank programs do not carry NVRTC (not part of what the GPU machines are
// promised: the driver, the CUDA runtime, cuDNN, NCCL): these definitions
// stand in for it, failing as NVRTC fails when it cannot compile, so that
// the engine would report an error rather than the program not start.
//
//===----------------------------------------------------------------------===//
#include <nvrtc.h>

#include <cstddef>

extern "C" {

nvrtcResult nvrtcCreateProgram(nvrtcProgram *, const char *, const char *, int,
                               const char *const *, const char *const *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char *const *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}

} // extern "C"
