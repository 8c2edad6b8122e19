//===- Driver.h - the slapoc pipeline as a library --------------*- C++ -*-===//
#ifndef SLAPO_DRIVER_DRIVER_H
#define SLAPO_DRIVER_DRIVER_H

namespace slapo {
/// Runs slapoc with command-line arguments; returns the process exit code
/// (0 success, 1 bad input or failed check).
int runSlapocMain(int argc, char **argv);
} // namespace slapo

#endif // SLAPO_DRIVER_DRIVER_H
