//===- Data.h - the inputs of each training step ----------------*- C++ -*-===//
//
// `--data FILE` is one of:
//
// - a token file: a flat array of N token ids, each a little-endian uint16,
//   or a little-endian uint32 if the file name ends in `.u32`; no header, so
//   the file's size must be a multiple of the token width (`numpy.ndarray.
//   tofile` of a uint16 or uint32 array writes one). Every input must be an
//   integer (I64 or I32) [B, T] tensor, and all of them get the same rows:
//   row b of step s (1-based) is tokens[start, start + T) with start =
//   randomBits(seed, s, b) mod (N - T + 1). `labels` is thus a copy of
//   `input_ids`: the models shift labels themselves. The file needs at least
//   T tokens; a token at or above the vocabulary size of an input it feeds
//   is an error when the file is opened (every token is checked, once).
// - a `.safetensors` batch file holding, for every input name, a tensor of
//   the input's dtype and shape [S, ...input shape], with the same S for all
//   inputs: step s uses batch (s - 1) mod S. Values an input uses as indices
//   must lie in [0, vocabulary size).
//
// Without --data, inputs are synthetic: element i of an integer input at
// step s is randomBits(seed, s, i) mod the size of the table it indexes (mod
// 2 if it indexes none), so inputs of one shape agree as with token files;
// floats are 2 * uniform01(randomBits(seed, s, i)) - 1, in [-1, 1); bools
// are the low bit. An input the user names in --own-values draws its own
// values instead, from seed XOR the FNV-1a hash of its name (T5's decoder
// inputs must not equal its labels).
//
// All three depend only on the seed and the step, so a resumed run sees what
// the uninterrupted one would have.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_DATA_H
#define SLAPO_RUNTIME_DATA_H

#include "slapo/runtime/Tensor.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace slapo::rt {

/// A forward input to fill. `indexBound` > 0: the values index a table of
/// that many rows, and data outside [0, indexBound) is an error, but for
/// `ignoredIndex`, which the tables skip.
struct DataInput {
  std::string name;
  Tensor tensor;
  int64_t indexBound;
  std::optional<int64_t> ignoredIndex;
};

class DataSource {
public:
  virtual ~DataSource();
  /// Writes the inputs of step `step` (1-based); `inputs` are those the
  /// source was opened for.
  virtual void fill(int64_t step, const std::vector<DataInput> &inputs) = 0;
  /// "tokens.bin (1000000 uint16 tokens)", for the start-up line.
  virtual std::string describe() const = 0;
};

/// Opens `path` for `inputs`: a batch file if it ends in `.safetensors`, a
/// token file otherwise. Checks that it can feed them; throws Error naming
/// the file (and the input) otherwise.
std::unique_ptr<DataSource>
openDataSource(const std::string &path, uint64_t seed,
               const std::vector<DataInput> &inputs);

/// Synthetic data for `inputs`, those named in `ownValues` with values of
/// their own; throws Error naming --own-values for a name no input has.
std::unique_ptr<DataSource>
makeSyntheticDataSource(uint64_t seed, const std::vector<DataInput> &inputs,
                        const std::vector<std::string> &ownValues = {});

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_DATA_H
