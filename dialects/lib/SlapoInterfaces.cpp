//===- SlapoInterfaces.cpp - slapo op interfaces --------------------------===//
#include "slapo/Dialect/SlapoInterfaces.h"

#include "slapo/Dialect/SlapoInterfaces.cpp.inc"
