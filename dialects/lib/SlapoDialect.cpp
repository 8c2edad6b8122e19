//===- SlapoDialect.cpp - the slapo dialect -------------------------------===//
#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "slapo/Dialect/SlapoDialect.cpp.inc"
#include "slapo/Dialect/SlapoEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "slapo/Dialect/SlapoAttrs.cpp.inc"

namespace slapo {

void SlapoDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "slapo/Dialect/SlapoOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "slapo/Dialect/SlapoAttrs.cpp.inc"
      >();
}

mlir::Operation *SlapoDialect::materializeConstant(mlir::OpBuilder &builder,
                                                   mlir::Attribute value,
                                                   mlir::Type type,
                                                   mlir::Location loc) {
  auto elements = value.dyn_cast<mlir::ElementsAttr>();
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

} // namespace slapo
