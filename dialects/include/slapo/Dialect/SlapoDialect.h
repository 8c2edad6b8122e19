//===- SlapoDialect.h - the slapo dialect -----------------------*- C++ -*-===//
#ifndef SLAPO_DIALECT_SLAPODIALECT_H
#define SLAPO_DIALECT_SLAPODIALECT_H

#include "mlir/IR/Dialect.h"

#include "slapo/Dialect/SlapoDialect.h.inc"

#endif // SLAPO_DIALECT_SLAPODIALECT_H
