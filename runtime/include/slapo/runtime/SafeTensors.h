//===- SafeTensors.h - the safetensors file format --------------*- C++ -*-===//
//
// Weights, checkpoints, gradients and batch files are safetensors
// (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header (padded with spaces to a multiple
// of 8) mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets relative to the first byte after the header) and an
// optional "__metadata__" object of strings, then the tensors' bytes. Python's
// `safetensors` reads what this writes and the other way round.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_SAFETENSORS_H
#define SLAPO_RUNTIME_SAFETENSORS_H

#include "slapo/runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace slapo::rt {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

/// Writes `tensors` in this order, atomically: to `path.tmp.<pid>` next to
/// `path`, synced, then renamed over it, so that `path` is always either the
/// old file or the complete new one. On failure the temporary file is removed
/// and the Error names `path`.
void writeSafeTensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// A safetensors file, its header checked when opened: a missing file,
/// truncated bytes, a malformed header, byte ranges outside the file or an
/// unknown dtype is an Error that names the file. The file stays open until
/// the reader is destroyed, so reads see the file that was opened even if it
/// is replaced meanwhile.
class SafeTensorsReader {
public:
  explicit SafeTensorsReader(const std::string &path);
  SafeTensorsReader(SafeTensorsReader &&other) noexcept;
  SafeTensorsReader &operator=(SafeTensorsReader &&other) noexcept;
  SafeTensorsReader(const SafeTensorsReader &) = delete;
  SafeTensorsReader &operator=(const SafeTensorsReader &) = delete;
  ~SafeTensorsReader();

  struct Info {
    DType dtype;
    Shape shape;
    /// The tensor's bytes are [begin, end) of the file (absolute offsets,
    /// header included).
    uint64_t begin, end;
  };
  const std::string &getPath() const { return path; }
  bool contains(const std::string &name) const { return infos.count(name); }
  /// Throws Error "path: no tensor 'name'" if there is none.
  const Info &getInfo(const std::string &name) const;
  /// The tensor names in the order of the file's header.
  const std::vector<std::string> &getNames() const { return names; }
  const std::map<std::string, std::string> &getMetadata() const {
    return metadata;
  }

  /// Reads tensor `name` into `out`, which must have its dtype and shape.
  void read(const std::string &name, const Tensor &out) const;
  /// Reads the `out.shape[dim]` slices of tensor `name` along `dim` that
  /// start at index `start` (a tensor-parallel shard, a batch of a batch
  /// file). `out` has the tensor's dtype, rank and sizes in the other dims.
  void readSlice(const std::string &name, int dim, int64_t start,
                 const Tensor &out) const;

private:
  std::string path;
  int fd = -1;
  std::vector<std::string> names;
  std::map<std::string, Info> infos;
  std::map<std::string, std::string> metadata;
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_SAFETENSORS_H
