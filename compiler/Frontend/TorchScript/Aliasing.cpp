//===- Aliasing.cpp - value semantics for views and in-place writes -------===//
//
// Eager PyTorch lets a tensor share memory with its views and writes into
// that memory in place; slapo IR has values only. The importer keeps both
// views of the same data apart the way functionalization does: every tensor
// belongs to a TensorStorage and knows the view steps that read it from the
// storage's owner. An in-place write computes the new value of the written
// tensor, runs the steps backwards to get the owner's new value, and bumps
// the storage's version; any tensor of the storage read after that is read
// again from the new value through its own steps. Tensors known at compile
// time stay eager tensors until the first runtime write, so that their views
// share memory exactly as in PyTorch until then.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "slapo/Dialect/TensorBuilder.h"

#include <ATen/ATen.h>

namespace slapo::torchscript {

ViewStep ViewStep::slice(int64_t dim, int64_t start, int64_t end,
                         int64_t step) {
  ViewStep view{Kind::Slice};
  view.dim = dim;
  view.start = start;
  view.end = end;
  view.step = step;
  return view;
}

ViewStep ViewStep::reshape(llvm::ArrayRef<int64_t> shape) {
  ViewStep view{Kind::Reshape};
  view.sizes.assign(shape.begin(), shape.end());
  return view;
}

ViewStep ViewStep::permute(llvm::ArrayRef<int64_t> permutation) {
  ViewStep view{Kind::Permute};
  view.sizes.assign(permutation.begin(), permutation.end());
  return view;
}

ViewStep ViewStep::broadcast(llvm::ArrayRef<int64_t> shape) {
  ViewStep view{Kind::Broadcast};
  view.sizes.assign(shape.begin(), shape.end());
  return view;
}

Known Known::viewOf(const Known &base, llvm::ArrayRef<ViewStep> steps,
                    at::Tensor shadow) {
  Known view;
  view.kind = Kind::Tensor;
  view.storage = base.storage;
  view.view = base.view;
  view.view.insert(view.view.end(), steps.begin(), steps.end());
  view.opaqueView = base.opaqueView;
  view.shadow = std::move(shadow);
  return view;
}

at::Tensor applyView(llvm::ArrayRef<ViewStep> steps, at::Tensor tensor) {
  for (const ViewStep &step : steps) {
    switch (step.kind) {
    case ViewStep::Kind::Slice:
      tensor = tensor.slice(step.dim, step.start, step.end, step.step);
      break;
    case ViewStep::Kind::Reshape:
      // A view wherever PyTorch's reshape makes one, as the meta run did.
      tensor = tensor.reshape(step.sizes);
      break;
    case ViewStep::Kind::Permute:
      tensor = tensor.permute(step.sizes);
      break;
    case ViewStep::Kind::Broadcast:
      tensor = tensor.expand(step.sizes);
      break;
    }
  }
  return tensor;
}

mlir::Value applyView(mlir::OpBuilder &builder, mlir::Location loc,
                      llvm::ArrayRef<ViewStep> steps, mlir::Value value) {
  TensorBuilder g(builder, loc);
  for (const ViewStep &step : steps) {
    switch (step.kind) {
    case ViewStep::Kind::Slice:
      value = g.slice(value, step.dim, step.start, step.end, step.step);
      break;
    case ViewStep::Kind::Reshape:
      value = g.reshape(value, step.sizes);
      break;
    case ViewStep::Kind::Permute:
      value = g.permute(value, step.sizes);
      break;
    case ViewStep::Kind::Broadcast:
      value = g.broadcastTo(value, step.sizes);
      break;
    }
  }
  return value;
}

/// The dims along which a broadcast step repeats its input: PyTorch refuses
/// most in-place writes into them, since one element has several places.
static llvm::SmallVector<int64_t> repeatedDims(const ViewStep &broadcast,
                                               llvm::ArrayRef<int64_t> from) {
  llvm::ArrayRef<int64_t> to = broadcast.sizes;
  size_t leading = to.size() - from.size();
  llvm::SmallVector<int64_t> dims;
  for (size_t dim = 0; dim < to.size(); ++dim)
    if (to[dim] != 1 && (dim < leading || from[dim - leading] == 1))
      dims.push_back(dim);
  return dims;
}

static at::IntArrayRef asSizes(llvm::ArrayRef<int64_t> shape) {
  return {shape.data(), shape.size()};
}

static llvm::SmallVector<int64_t> inversePermutation(const ViewStep &permute) {
  llvm::SmallVector<int64_t> inverse(permute.sizes.size());
  for (auto [resultDim, inputDim] : llvm::enumerate(permute.sizes))
    inverse[inputDim] = resultDim;
  return inverse;
}

/// The value `before` has after a write of `updated` into what `step` (not a
/// broadcast, see unbroadcast) reads from it.
static mlir::Value unapplyStep(TensorBuilder &g, const ViewStep &step,
                               mlir::Value before, mlir::Value updated) {
  switch (step.kind) {
  case ViewStep::Kind::Slice:
    return g.sliceScatter(before, updated, step.dim, step.start, step.step);
  case ViewStep::Kind::Reshape:
  case ViewStep::Kind::Broadcast:
    return g.reshape(updated, shapeOf(before));
  case ViewStep::Kind::Permute:
    return g.permute(updated, inversePermutation(step));
  }
  llvm_unreachable("unknown view step");
}

/// Which elements of a tensor of shape `before` a write reaches through
/// `step`, given which elements of the step's result it reaches.
static at::Tensor unapplyStep(const ViewStep &step,
                              llvm::ArrayRef<int64_t> before,
                              const at::Tensor &written) {
  switch (step.kind) {
  case ViewStep::Kind::Slice:
    return at::zeros(asSizes(before), written.options())
        .slice_scatter(written, step.dim, step.start, step.end, step.step);
  case ViewStep::Kind::Reshape:
    return written.reshape(asSizes(before));
  case ViewStep::Kind::Permute:
    return written.permute(inversePermutation(step));
  case ViewStep::Kind::Broadcast:
    return written.to(at::kLong)
        .sum(repeatedDims(step, before), /*keepdim=*/true)
        .gt(0)
        .reshape(asSizes(before));
  }
  llvm_unreachable("unknown view step");
}

mlir::FailureOr<mlir::Value>
Importer::unbroadcast(const ViewStep &step, mlir::Value before,
                      mlir::Value updated, const at::Tensor &written,
                      bool uniform, mlir::Location loc) {
  // Copies share memory: a memory element gets the value written to one of
  // its copies. Supported when one index along the repeated dims holds every
  // write (e[k] = ..., or a fill_ of all of e), and, unless the written
  // value is uniform, no element is written twice (eager PyTorch refuses
  // that for most ops).
  llvm::SmallVector<int64_t> dims = repeatedDims(step, shapeOf(before));
  at::Tensor counts = written.to(at::kLong).sum(dims, /*keepdim=*/true);
  at::Tensor reached = counts.gt(0);
  if (!uniform && counts.gt(1).any().item<bool>())
    return mlir::failure();
  llvm::SmallVector<int64_t> index(dims.size(), 0);
  auto atIndex = [&](const auto &tensor, auto slice) {
    auto result = tensor;
    for (auto [dim, i] : llvm::zip(dims, index))
      result = slice(result, dim, i);
    return result;
  };
  auto next = [&] {
    for (size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < step.sizes[dims[d]])
        return true;
      index[d] = 0;
    }
    return false;
  };
  bool found = false;
  do
    found = atIndex(written, [](const at::Tensor &t, int64_t dim, int64_t i) {
              return t.slice(dim, i, i + 1);
            }).equal(reached);
  while (!found && next());
  if (!found)
    return mlir::failure();
  TensorBuilder g(builder, loc);
  mlir::Value value = g.reshape(
      atIndex(updated, [&](mlir::Value v, int64_t dim,
                           int64_t i) { return g.slice(v, dim, i, i + 1); }),
      shapeOf(before));
  at::Tensor reachedBefore = reached.reshape(asSizes(shapeOf(before)));
  if (reachedBefore.all().item<bool>())
    return value;
  return g.where(materialize(reachedBefore, loc), value, before);
}

mlir::Value Importer::read(const Known &known, mlir::Location loc,
                           llvm::StringRef reader) {
  if (known.isConstant())
    return materialize(known.constant.toTensor(), loc);
  const TensorStorage &storage = *known.storage;
  if (known.lastRead && known.lastReadVersion == storage.version)
    return known.lastRead;
  if (!known.opaqueView.empty()) {
    error(loc, reader + " reads a view made by " + known.opaqueView +
                   " of a tensor that " + storage.lastWrite +
                   " has written in place since; slapoc models views made "
                   "by slicing, indexing with integers, view, reshape, "
                   "permute, transpose and expand only");
    return nullptr;
  }
  known.lastRead = applyView(builder, loc, known.view, storage.value);
  known.lastReadVersion = storage.version;
  return known.lastRead;
}

mlir::LogicalResult Importer::write(const Known &target, mlir::Value value,
                                    bool uniform, jit::Node *node,
                                    const Frame &frame) {
  mlir::Location loc = locationOf(node, frame);
  TensorStorage &storage = *target.storage;
  auto fail = [&](const llvm::Twine &message) {
    error(loc, describe(node, frame) + " " + message);
    return mlir::failure();
  };
  if (!storage.parameter.empty() && !storage.buffer)
    return fail("writes trained parameter '" + storage.parameter +
                "' in place; slapoc updates parameters only in the "
                "optimizer step");
  if (!target.opaqueView.empty())
    return fail("writes in place through a view made by " + target.opaqueView +
                "; slapoc models views made by slicing, indexing with "
                "integers, view, reshape, permute, transpose and expand only");

  // The tensors from the storage's owner to the target, each read from the
  // one before; the write then runs back along them.
  TensorBuilder g(builder, loc);
  llvm::SmallVector<mlir::Value> along;
  if (!target.view.empty()) {
    along.push_back(storage.constant.defined()
                        ? materialize(storage.constant, loc)
                        : storage.value);
    for (const ViewStep &step : llvm::ArrayRef(target.view).drop_back())
      along.push_back(
          applyView(builder, loc, llvm::ArrayRef(step), along.back()));
  }
  llvm::SmallVector<int64_t> targetShape(shapeOf(value));
  for (size_t i = target.view.size(); i-- > 0;) {
    const ViewStep &step = target.view[i];
    if (step.kind != ViewStep::Kind::Broadcast ||
        repeatedDims(step, shapeOf(along[i])).empty()) {
      value = unapplyStep(g, step, along[i], value);
      continue;
    }
    // Which elements of the expanded tensor the write reaches.
    at::Tensor written =
        at::ones(asSizes(targetShape), at::TensorOptions().dtype(at::kBool));
    for (size_t j = target.view.size(); j-- > i + 1;)
      written = unapplyStep(target.view[j], shapeOf(along[j]), written);
    mlir::FailureOr<mlir::Value> unbroadcasted =
        unbroadcast(step, along[i], value, written, uniform, loc);
    if (mlir::failed(unbroadcasted))
      return fail("writes in place into an expanded tensor whose elements "
                  "share memory, in a way slapoc cannot model; clone() it "
                  "first");
    value = *unbroadcasted;
  }
  storage.constant = at::Tensor();
  storage.value = value;
  ++storage.version;
  storage.lastWrite = describeAt(node, frame);
  if (storage.buffer) {
    auto written = llvm::find_if(bufferWrites, [&](const BufferWrite &w) {
      return w.storage == target.storage;
    });
    if (written == bufferWrites.end())
      bufferWrites.push_back({target.storage, frame.modulePath, loc});
    else
      *written = {target.storage, frame.modulePath, loc};
  }
  return mlir::success();
}

} // namespace slapo::torchscript
