//===- NodeLowering.cpp - what a lowering sees of its node ----------------===//
#include "Importer.h"

#include "slapo/Reference/Interpreter.h"

namespace slapo::torchscript {

NodeLowering::NodeLowering(Importer &importer, jit::Node *node, Frame &frame,
                           std::vector<Known> outputShadows)
    : importer(importer), node(node), frame(frame),
      loc(importer.locationOf(node, frame)),
      outputShadows(std::move(outputShadows)) {}

mlir::OpBuilder &NodeLowering::getBuilder() { return importer.getBuilder(); }
mlir::MLIRContext *NodeLowering::getContext() { return &importer.getContext(); }
int64_t NodeLowering::takeRandomStream() { return importer.takeRandomStream(); }

const Known &NodeLowering::input(size_t i) const {
  return frame.values[node->input(i)];
}

bool NodeLowering::isNone(size_t i) const {
  const Known &known = input(i);
  return known.is(Known::Kind::Constant) && known.constant.isNone();
}

mlir::LogicalResult NodeLowering::writeInput(size_t i, mlir::Value value) {
  return importer.write(input(i), value, /*uniform=*/false, node, frame);
}

void NodeLowering::report(const llvm::Twine &message) {
  importer.error(loc, Importer::describe(node, frame) + ": " + message);
}

mlir::Value NodeLowering::cast(mlir::Value value, mlir::Type elementType) {
  auto type = value.getType().cast<mlir::RankedTensorType>();
  if (!elementType || type.getElementType() == elementType)
    return value;
  return create<CastOp>(type.clone(elementType), value);
}

mlir::Value NodeLowering::scalar(double number, mlir::Type elementType) {
  auto type = mlir::RankedTensorType::get({}, elementType);
  mlir::Attribute value;
  if (elementType.isa<mlir::FloatType>())
    value = mlir::FloatAttr::get(elementType, number);
  else if (elementType.isInteger(1))
    value = mlir::IntegerAttr::get(elementType, number != 0);
  else
    value = mlir::IntegerAttr::get(elementType, (int64_t)number);
  return create<ConstantOp>(type, mlir::DenseElementsAttr::get(type, value));
}

mlir::Value NodeLowering::materialize(const at::Tensor &value) {
  return importer.materialize(value, loc);
}

mlir::Value NodeLowering::read(const Known &tensor) {
  return importer.read(tensor, loc, Importer::describe(node, frame));
}

mlir::Value NodeLowering::tensor(size_t i, mlir::Type elementType) {
  const Known &known = input(i);
  if (known.is(Known::Kind::Tensor) && known.isConstant()) {
    // Cast at compile time: the IR gets one constant.
    at::Tensor constant = known.constant.toTensor();
    if (elementType)
      constant = constant.to(*reference::toScalarType(elementType));
    return materialize(constant);
  }
  if (known.is(Known::Kind::Tensor)) {
    mlir::Value value = read(known);
    return value ? cast(value, elementType) : nullptr;
  }
  if (known.is(Known::Kind::Constant)) {
    const c10::IValue &value = known.constant;
    if ((value.isDouble() || value.isInt() || value.isBool()) && elementType)
      return scalar(value.isDouble() ? value.toDouble()
                    : value.isInt()  ? (double)value.toInt()
                                     : (double)value.toBool(),
                    elementType);
  }
  report("input " + std::to_string(i) + " must be a tensor");
  return nullptr;
}

mlir::Value NodeLowering::optionalTensor(size_t i, mlir::Type elementType) {
  return isNone(i) ? mlir::Value() : tensor(i, elementType);
}

std::optional<c10::IValue> NodeLowering::constant(size_t i) {
  const Known &known = input(i);
  if (known.isConstant() && !known.is(Known::Kind::Aggregate))
    return known.constant;
  report("input " + std::to_string(i) +
         " must be known at compile time (it depends on tensor data)");
  return std::nullopt;
}

std::optional<int64_t> NodeLowering::intConstant(size_t i) {
  std::optional<c10::IValue> value = constant(i);
  if (!value)
    return std::nullopt;
  if (!value->isInt()) {
    report("input " + std::to_string(i) + " must be an integer");
    return std::nullopt;
  }
  return value->toInt();
}

std::optional<double> NodeLowering::doubleConstant(size_t i) {
  std::optional<c10::IValue> value = constant(i);
  if (!value)
    return std::nullopt;
  if (value->isDouble())
    return value->toDouble();
  if (value->isInt())
    return (double)value->toInt();
  report("input " + std::to_string(i) + " must be a number");
  return std::nullopt;
}

std::optional<std::vector<int64_t>> NodeLowering::intListConstant(size_t i) {
  const Known &known = input(i);
  if (known.is(Known::Kind::Aggregate)) {
    std::vector<int64_t> values;
    for (const Known &element : *known.elements) {
      if (!element.is(Known::Kind::Constant) || !element.constant.isInt()) {
        report("input " + std::to_string(i) +
               " must be a list of integers known at compile time");
        return std::nullopt;
      }
      values.push_back(element.constant.toInt());
    }
    return values;
  }
  std::optional<c10::IValue> value = constant(i);
  if (!value)
    return std::nullopt;
  if (value->isIntList())
    return value->toIntVector();
  if (value->isInt())
    return std::vector<int64_t>{value->toInt()};
  report("input " + std::to_string(i) + " must be a list of integers");
  return std::nullopt;
}

at::Tensor NodeLowering::shadowOf(size_t i) const {
  const Known &known = input(i);
  return known.is(Known::Kind::Tensor) ? known.shadow : at::Tensor();
}

const at::Tensor &NodeLowering::outputShadow(size_t j) const {
  return outputShadows.at(j).shadow;
}

mlir::RankedTensorType NodeLowering::outputType(size_t j) const {
  return getTensorType(&importer.getContext(), outputShadow(j));
}

mlir::Type NodeLowering::outputElementType(size_t j) const {
  return outputType(j).getElementType();
}

const std::vector<Known> &NodeLowering::outputElements(size_t j) const {
  return *outputShadows.at(j).elements;
}

void NodeLowering::setOutput(size_t j, mlir::Value value) {
  at::Tensor shadow = outputShadows.at(j).shadow;
  frame.values[node->output(j)] = Known::ofTensor(value, shadow);
}

void NodeLowering::setOutput(size_t j, Known known) {
  frame.values[node->output(j)] = std::move(known);
}

std::optional<int64_t> NodeLowering::dim(int64_t d, int64_t rank) {
  int64_t normalized = d < 0 ? d + rank : d;
  if (normalized < 0 || normalized >= std::max<int64_t>(rank, 1)) {
    report("dim " + std::to_string(d) + " is out of range for rank " +
           std::to_string(rank));
    return std::nullopt;
  }
  return normalized;
}

} // namespace slapo::torchscript
