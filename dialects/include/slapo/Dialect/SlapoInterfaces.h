//===- SlapoInterfaces.h - slapo op interfaces ------------------*- C++ -*-===//
#ifndef SLAPO_DIALECT_SLAPOINTERFACES_H
#define SLAPO_DIALECT_SLAPOINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

#include "slapo/Dialect/Sharding.h"

#include "slapo/Dialect/SlapoInterfaces.h.inc"

#endif // SLAPO_DIALECT_SLAPOINTERFACES_H
