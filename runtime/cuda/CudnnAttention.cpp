//===- CudnnAttention.cpp - flash attention through cuDNN's SDPA ----------===//
//
// 16-bit flash attention, forward and backward, as cuDNN's fused scaled
// dot-product attention (what PyTorch's SDPA runs on Hopper), built with
// the cuDNN frontend's graph API: one graph per pass and configuration
// (dtype, sizes, masks, scale), built and checked the first time it is
// seen and kept in the context with the workspace it needs, as the
// cuBLASLt plans are. A configuration cuDNN refuses while its graph is
// built (a head size, a sequence length, the GPU, the cuDNN version) is
// remembered as refused, said once on stderr, and runs on the runtime's
// own kernels (Attention.cu) from then on.
//
// The op's masks as cuDNN takes them: a keep mask that is one causal [T, S]
// plane (GPT-2's) becomes cuDNN's causal mask, which also skips the masked
// tiles; anything else (BERT's padding bias, other keep masks) becomes one
// additive bias tensor written for each call (writeAttentionBias), which
// gives the same scores: cuDNN adds the bias to the scaled scores, and a
// masked score replaced by the dtype's lowest value is what the lowest
// value absorbs a scaled score into. A keep mask is read once, with the
// host waiting, to find whether it is causal; where it was, every later
// call queues a check that it still is (checkCausalKeep), so that a mask
// that changes in place fails loudly at the next synchronize instead of
// being attended as causal.
//
// cuDNN's "Stats" output is the log-sum-exp of each row's (scaled, masked)
// scores in natural log, in f32, [B, H, T, 1]: the op's logsumexp, which is
// f32 (the compute type) for 16-bit operands, so cuDNN writes it and reads
// it back in place.
// Query, key, value, out and their gradients are given to cuDNN as [B, H,
// T, D] with the strides of the attention's layout (Bshd: [T * H * D, D,
// H * D, 1]), so that token-major operands need no copy; a head window of
// a tensor of Hs heads (AttentionGeometry.h) has Bshd's strides with Hs for
// H, [T * Hs * D, D, Hs * D, 1], from its first head: the query, key and
// value of GPT-2's packed projection are read in place, and their gradients
// written into one packed tensor. The stats and the bias stay contiguous.
// Grouped-query attention's key and value and their gradients are [B, Hk,
// S, D], Hk the key heads (AttentionGeometry.h), with their layout's strides
// for Hk heads: cuDNN reads a query head's group's key and value and sums
// the group's key and value gradients itself (its SDPA takes any Hk that
// divides H).
// cuDNN needs every operand 16-byte aligned, a window's first head
// included: a configuration with one that is not runs on the runtime's own
// kernels.
// The backward asks for cuDNN's deterministic algorithm (the same bits on
// every run, as the rest of the runtime) and takes the other one, saying so
// once, where cuDNN has none.
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"
#include "ContextImpl.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/cuda/Kernels.h"

// The graphs are never serialized: no JSON library.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace slapo::rt::cuda {

namespace fe = cudnn_frontend;

struct AttentionPlans {
  struct Graph {
    /// Null where cuDNN refused the configuration.
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspaceBytes = 0;
  };
  /// Keyed by Config::getKey.
  std::map<std::vector<int64_t>, Graph> graphs;
  /// Whether the keep mask at an address, of [T, S], was causal when it was
  /// read.
  std::map<std::tuple<const void *, int64_t, int64_t>, bool> causalKeeps;
  /// Forwards and backwards run through cuDNN.
  int64_t runs = 0;
};

namespace {

enum class Pass : int64_t { Forward, Backward };

/// The tensors' uids in the graphs' variant packs.
enum Uid : int64_t {
  kQuery = 1,
  kKey,
  kValue,
  kOut,
  kStats,
  kBias,
  kGrad,
  kGradQuery,
  kGradKey,
  kGradValue
};

/// A tensor that cuDNN reads or writes, by its uid.
struct Operand {
  Uid uid;
  const Tensor *tensor;
};

AttentionPlans &getPlans(Context &ctx) {
  std::shared_ptr<AttentionPlans> &plans = ctx.getImpl().attentionPlans;
  if (!plans)
    plans = std::make_shared<AttentionPlans>();
  return *plans;
}

/// A tensor as cuDNN's graphs take it: its dims and their strides.
struct Strided {
  std::vector<int64_t> dims, strides;
};

Strided getContiguous(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return {dims, strides};
}

/// What an attention's graphs depend on.
struct Config {
  AttentionGeometry g;
  DType dtype;
  double scale;
  /// The keep mask as cuDNN's causal mask.
  bool causal = false;
  /// The other masks as one additive bias of [biasBatch, biasHeads, T, S].
  bool biased = false;
  int64_t biasBatch = 1, biasHeads = 1;
  /// Whether every operand is 16-byte aligned, as cuDNN needs.
  bool aligned = true;
  /// The heads each operand stores, by uid: g.heads, or under Bshd more
  /// for a head window, whose rows are that many heads apart, or
  /// g.keyHeads for a grouped key, value or gradient of theirs. 0 for the
  /// tensors the pass does not have.
  int64_t storedHeads[kGradValue + 1] = {};
  /// The compute capability (10 * major + minor) the graph is for where it
  /// is only validated, without a GPU; 0: the current GPU's.
  int smVersion = 0;

  /// Records the heads `operands` store and whether they are aligned.
  void addOperands(std::initializer_list<Operand> operands) {
    for (const Operand &operand : operands) {
      storedHeads[operand.uid] = g.getStoredHeads(*operand.tensor);
      aligned = aligned &&
                reinterpret_cast<uintptr_t>(operand.tensor->data) % 16 == 0;
    }
  }

  /// Whether `uid` is key, value or a gradient of theirs, whose heads are
  /// g.keyHeads.
  static bool isKeySide(Uid uid) {
    return uid == kKey || uid == kValue || uid == kGradKey || uid == kGradValue;
  }

  /// Query, key, value, out or a gradient of theirs (`uid`): [B, H, length,
  /// width] (H: g.keyHeads for the key side) in the attention's layout, with
  /// the heads it stores.
  Strided getHeads(Uid uid, int64_t length, int64_t width) const {
    Strided heads = getContiguous(
        {g.batch, isKeySide(uid) ? g.keyHeads : g.heads, length, width});
    int64_t stored = storedHeads[uid];
    if (g.layout == AttentionLayout::Bshd)
      heads.strides = {length * stored * width, width, stored * width, 1};
    return heads;
  }
  std::vector<int64_t> getBiasDims() const {
    return {biasBatch, biasHeads, g.rows, g.keys};
  }

  std::vector<int64_t> getKey(Pass pass) const {
    int64_t scaleBits;
    std::memcpy(&scaleBits, &scale, sizeof(scale));
    std::vector<int64_t> key = {
        int64_t(pass), int64_t(dtype), int64_t(g.layout),
        g.batch,       g.heads,        g.keyHeads,
        g.rows,        g.keys,         g.headSize,
        g.valueSize,   causal,         biased,
        biasBatch,     biasHeads,      scaleBits,
        aligned};
    key.insert(key.end(), std::begin(storedHeads), std::end(storedHeads));
    return key;
  }

  /// "bf16 attention of query [2, 4, 37, 24], key [2, 2, 37, 24] and value
  /// [2, 2, 37, 24] ...".
  std::string describe() const {
    std::string text =
        std::string(getName(dtype)) + " attention of query " +
        Shape({g.batch, g.heads, g.rows, g.headSize}).str() + ", key " +
        Shape({g.batch, g.keyHeads, g.keys, g.headSize}).str() + " and value " +
        Shape({g.batch, g.keyHeads, g.keys, g.valueSize}).str();
    if (g.layout == AttentionLayout::Bshd)
      text += ", stored [B, T, H, D]";
    const std::pair<Uid, const char *> windows[] = {
        {kQuery, "query"},          {kKey, "key"},
        {kValue, "value"},          {kGradQuery, "query gradient"},
        {kGradKey, "key gradient"}, {kGradValue, "value gradient"}};
    for (auto [uid, name] : windows)
      if (storedHeads[uid] > g.heads)
        text += std::string(", ") + name + " a head window of " +
                std::to_string(storedHeads[uid]) + " heads";
    if (causal)
      text += ", causal";
    if (biased)
      text += ", bias " + Shape({biasBatch, biasHeads, g.rows, g.keys}).str();
    return text;
  }
};

/// Whether `keep` is one causal [T, S] plane (key s kept for row t iff s <=
/// t). Read once per address and size, the host waiting for it; where it
/// was causal, later calls queue the check that it still is.
bool isCausalKeep(Context &ctx, const Tensor &keep,
                  const AttentionGeometry &g) {
  int rank = keep.getRank();
  if (keep.getNumElements() != g.rows * g.keys ||
      keep.shape[rank - 2] != g.rows || keep.shape[rank - 1] != g.keys)
    return false;
  AttentionPlans &plans = getPlans(ctx);
  auto place =
      std::make_tuple(static_cast<const void *>(keep.data), g.rows, g.keys);
  auto found = plans.causalKeeps.find(place);
  if (found != plans.causalKeeps.end()) {
    if (found->second)
      checkCausalKeep(ctx, keep);
    return found->second;
  }
  std::vector<uint8_t> elements(g.rows * g.keys);
  ctx.copyToHost(elements.data(), keep.data, elements.size());
  bool causal = true;
  for (int64_t t = 0; t < g.rows && causal; ++t)
    for (int64_t s = 0; s < g.keys && causal; ++s)
      causal = (elements[t * g.keys + s] != 0) == (s <= t);
  plans.causalKeeps.emplace(place, causal);
  return causal;
}

/// The configuration cuDNN would run the attention as; none where cuDNN's
/// attention does not apply (f32 or f64, an attention dropout).
std::optional<Config> getConfig(Context &ctx,
                                std::initializer_list<Operand> operands,
                                const Tensor &query, const Tensor &key,
                                const Tensor &value, const Tensor &keep,
                                const Tensor &bias, const Tensor &out,
                                double scale, AttentionLayout layout,
                                const AttentionDropout &dropout) {
  if (dropout.p > 0 ||
      (query.dtype != DType::BF16 && query.dtype != DType::F16))
    return std::nullopt;
  Config c{AttentionGeometry(query, key, value, keep, bias, out, layout),
           query.dtype, scale};
  const AttentionGeometry &g = c.g;
  c.causal = keep && isCausalKeep(ctx, keep, g);
  c.biased = bias || (keep && !c.causal);
  if (c.biased) {
    // Full along the batch or the heads where a mask written into the bias
    // varies along them.
    bool keepWritten = keep && !c.causal;
    if ((keepWritten && g.keepStrides[0]) || (bias && g.biasStrides[0]))
      c.biasBatch = g.batch;
    if ((keepWritten && g.keepStrides[1]) || (bias && g.biasStrides[1]))
      c.biasHeads = g.heads;
  }
  c.addOperands(operands);
  return c;
}

std::shared_ptr<fe::graph::Tensor_attributes> addInput(fe::graph::Graph &graph,
                                                       const char *name,
                                                       Uid uid,
                                                       const Strided &tensor) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(tensor.dims)
                          .set_stride(tensor.strides));
}

void setOutput(const std::shared_ptr<fe::graph::Tensor_attributes> &tensor,
               Uid uid, const Strided &strided) {
  tensor->set_output(true)
      .set_uid(uid)
      .set_dim(strided.dims)
      .set_stride(strided.strides);
}

std::shared_ptr<fe::graph::Graph> makeGraph(const Config &c) {
  auto graph = std::make_shared<fe::graph::Graph>();
  if (c.smVersion)
    graph->set_sm_version(c.smVersion);
  graph
      ->set_io_data_type(c.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16
                                                : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

/// The scale and the masks of `c`, on SDPA_attributes or
/// SDPA_backward_attributes.
template <typename Attributes>
void setScaleAndMasks(const Config &c, fe::graph::Graph &graph,
                      Attributes &attributes) {
  attributes.set_attn_scale(float(c.scale));
  if (c.causal)
    attributes.set_causal_mask(true);
  if (c.biased)
    attributes.set_bias(
        addInput(graph, "bias", kBias, getContiguous(c.getBiasDims())));
}

/// The f32 log-sum-exp, [B, H, T, 1] in every layout.
Strided getStats(const AttentionGeometry &g) {
  return getContiguous({g.batch, g.heads, g.rows, 1});
}

/// The query, key and value inputs of `c`'s graphs, forward and backward.
std::array<std::shared_ptr<fe::graph::Tensor_attributes>, 3>
addQueryKeyValue(const Config &c, fe::graph::Graph &graph) {
  const AttentionGeometry &g = c.g;
  return {
      addInput(graph, "query", kQuery, c.getHeads(kQuery, g.rows, g.headSize)),
      addInput(graph, "key", kKey, c.getHeads(kKey, g.keys, g.headSize)),
      addInput(graph, "value", kValue,
               c.getHeads(kValue, g.keys, g.valueSize))};
}

std::shared_ptr<fe::graph::Graph> makeForward(const Config &c) {
  std::shared_ptr<fe::graph::Graph> graph = makeGraph(c);
  const AttentionGeometry &g = c.g;
  auto [query, key, value] = addQueryKeyValue(c, *graph);
  auto attributes = fe::graph::SDPA_attributes()
                        .set_name("flash_attention")
                        .set_generate_stats(true);
  setScaleAndMasks(c, *graph, attributes);
  auto [out, stats] = graph->sdpa(query, key, value, attributes);
  setOutput(out, kOut, c.getHeads(kOut, g.rows, g.valueSize));
  setOutput(stats, kStats, getStats(g));
  stats->set_data_type(fe::DataType_t::FLOAT);
  return graph;
}

std::shared_ptr<fe::graph::Graph> makeBackward(const Config &c,
                                               bool deterministic) {
  std::shared_ptr<fe::graph::Graph> graph = makeGraph(c);
  const AttentionGeometry &g = c.g;
  auto [query, key, value] = addQueryKeyValue(c, *graph);
  auto out =
      addInput(*graph, "out", kOut, c.getHeads(kOut, g.rows, g.valueSize));
  auto grad =
      addInput(*graph, "grad", kGrad, c.getHeads(kGrad, g.rows, g.valueSize));
  auto stats = addInput(*graph, "stats", kStats, getStats(g));
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto attributes = fe::graph::SDPA_backward_attributes()
                        .set_name("flash_attention_grad")
                        .set_deterministic_algorithm(deterministic);
  setScaleAndMasks(c, *graph, attributes);
  auto [gradQuery, gradKey, gradValue] =
      graph->sdpa_backward(query, key, value, out, grad, stats, attributes);
  setOutput(gradQuery, kGradQuery, c.getHeads(kGradQuery, g.rows, g.headSize));
  setOutput(gradKey, kGradKey, c.getHeads(kGradKey, g.keys, g.headSize));
  setOutput(gradValue, kGradValue, c.getHeads(kGradValue, g.keys, g.valueSize));
  return graph;
}

/// Validates `graph`, lowers it to cuDNN's operation graph, and builds the
/// execution plan cuDNN's heuristic ranks first among those that support
/// it: the empty string where that worked, else cuDNN's reason.
std::string buildPlans(Context &ctx, fe::graph::Graph &graph) {
  try {
    fe::error_t status = graph.validate();
    if (status.is_good())
      status =
          graph.build_operation_graph(ctx.getImpl().getCudnn(ctx.getStream()));
    if (status.is_good())
      status = graph.create_execution_plans({fe::HeurMode_t::A});
    if (status.is_good())
      status = graph.check_support();
    if (status.is_good())
      status = graph.build_plans();
    return status.is_good() ? std::string() : "cuDNN: " + status.get_message();
  } catch (const std::exception &error) {
    // The frontend reports with exceptions in places, too.
    return std::string("cuDNN's frontend: ") + error.what();
  }
}

/// The graph of `c`'s `pass`, made the first time; with a null graph where
/// cuDNN refused it, which is said once on stderr.
const AttentionPlans::Graph &getGraph(Context &ctx, const Config &c,
                                      Pass pass) {
  AttentionPlans &plans = getPlans(ctx);
  std::vector<int64_t> key = c.getKey(pass);
  auto found = plans.graphs.find(key);
  if (found != plans.graphs.end())
    return found->second;
  const char *what = pass == Pass::Forward ? "forward" : "backward";
  AttentionPlans::Graph made;
  std::string refusal;
  if (!c.aligned) {
    refusal = "an operand is not 16-byte aligned";
  } else if (pass == Pass::Forward) {
    made.graph = makeForward(c);
    refusal = buildPlans(ctx, *made.graph);
  } else {
    made.graph = makeBackward(c, /*deterministic=*/true);
    refusal = buildPlans(ctx, *made.graph);
    if (!refusal.empty()) {
      made.graph = makeBackward(c, /*deterministic=*/false);
      std::string other = buildPlans(ctx, *made.graph);
      if (other.empty())
        std::cerr << "slapo: cuDNN has no deterministic attention backward "
                     "for the "
                  << c.describe() << " (" << refusal
                  << "); its gradients may differ in the last bits from run "
                     "to run\n";
      refusal = other;
    }
  }
  if (refusal.empty()) {
    fe::error_t status = made.graph->get_workspace_size(made.workspaceBytes);
    if (status.is_bad())
      refusal = "cuDNN: " + status.get_message();
  }
  if (!refusal.empty()) {
    made = AttentionPlans::Graph();
    std::cerr << "slapo: cuDNN's fused attention does not run the " << what
              << " of the " << c.describe() << " (" << refusal
              << "); it runs on the runtime's own flash attention kernel\n";
  }
  return plans.graphs.emplace(key, made).first->second;
}

/// An attention that cuDNN runs: its configuration and its pass's graph.
struct Prepared {
  Config config;
  const AttentionPlans::Graph *graph;
};

/// The configuration and graph of `pass` of the attention of `operands` (the
/// tensors cuDNN reads and writes); none where cuDNN does not run it.
std::optional<Prepared>
prepare(Context &ctx, Pass pass, std::initializer_list<Operand> operands,
        const Tensor &query, const Tensor &key, const Tensor &value,
        const Tensor &keep, const Tensor &bias, const Tensor &out, double scale,
        AttentionLayout layout, const AttentionDropout &dropout) {
  std::optional<Config> c = getConfig(ctx, operands, query, key, value, keep,
                                      bias, out, scale, layout, dropout);
  if (!c)
    return std::nullopt;
  const AttentionPlans::Graph &graph = getGraph(ctx, *c, pass);
  if (!graph.graph)
    return std::nullopt;
  return Prepared{*c, &graph};
}

/// Writes the bias of `c`, if any, into scratch and adds it to `pack`.
void addBias(Context &ctx, const Config &c, const Tensor &keep,
             const Tensor &bias, double maskedScore,
             std::unordered_map<int64_t, void *> &pack) {
  if (!c.biased)
    return;
  std::vector<int64_t> dims = c.getBiasDims();
  Shape shape({dims[0], dims[1], dims[2], dims[3]});
  Tensor combined(
      ctx.getImpl().getScratch(Scratch::AttentionBias,
                               shape.getNumElements() * getSize(c.dtype),
                               ctx.getStream()),
      c.dtype, shape);
  writeAttentionBias(ctx, c.g, c.causal ? Tensor() : keep, bias, maskedScore,
                     combined);
  pack[kBias] = combined.data;
}

void execute(Context &ctx, const AttentionPlans::Graph &graph,
             std::unordered_map<int64_t, void *> &pack) {
  Context::Impl &impl = ctx.getImpl();
  void *workspace =
      impl.getScratch(Scratch::AttentionWorkspace, size_t(graph.workspaceBytes),
                      ctx.getStream());
  fe::error_t status =
      graph.graph->execute(impl.getCudnn(ctx.getStream()), pack, workspace);
  if (status.is_bad())
    throw Error("cuDNN's fused attention failed: " + status.get_message());
  ++getPlans(ctx).runs;
}

} // namespace

bool runCudnnAttention(Context &ctx, const Tensor &query, const Tensor &key,
                       const Tensor &value, const Tensor &keep,
                       const Tensor &bias, const Tensor &out,
                       const Tensor &logsumexp, double scale,
                       double maskedScore, AttentionLayout layout,
                       const AttentionDropout &dropout) {
  std::optional<Prepared> prepared =
      prepare(ctx, Pass::Forward,
              {{kQuery, &query}, {kKey, &key}, {kValue, &value}, {kOut, &out}},
              query, key, value, keep, bias, out, scale, layout, dropout);
  if (!prepared)
    return false;
  std::unordered_map<int64_t, void *> pack = {{kQuery, query.data},
                                              {kKey, key.data},
                                              {kValue, value.data},
                                              {kOut, out.data},
                                              {kStats, logsumexp.data}};
  addBias(ctx, prepared->config, keep, bias, maskedScore, pack);
  execute(ctx, *prepared->graph, pack);
  return true;
}

bool runCudnnAttentionGrad(Context &ctx, const Tensor &query, const Tensor &key,
                           const Tensor &value, const Tensor &keep,
                           const Tensor &bias, const Tensor &out,
                           const Tensor &logsumexp, const Tensor &grad,
                           const Tensor &gradQuery, const Tensor &gradKey,
                           const Tensor &gradValue, double scale,
                           double maskedScore, AttentionLayout layout,
                           const AttentionDropout &dropout) {
  std::optional<Prepared> prepared =
      prepare(ctx, Pass::Backward,
              {{kQuery, &query},
               {kKey, &key},
               {kValue, &value},
               {kOut, &out},
               {kGrad, &grad},
               {kGradQuery, &gradQuery},
               {kGradKey, &gradKey},
               {kGradValue, &gradValue}},
              query, key, value, keep, bias, out, scale, layout, dropout);
  if (!prepared)
    return false;
  std::unordered_map<int64_t, void *> pack = {
      {kQuery, query.data},         {kKey, key.data},
      {kValue, value.data},         {kOut, out.data},
      {kGrad, grad.data},           {kStats, logsumexp.data},
      {kGradQuery, gradQuery.data}, {kGradKey, gradKey.data},
      {kGradValue, gradValue.data}};
  addBias(ctx, prepared->config, keep, bias, maskedScore, pack);
  execute(ctx, *prepared->graph, pack);
  return true;
}

std::string validateCudnnAttention(DType dtype,
                                   const std::array<int64_t, 6> &sizes,
                                   bool causal, int64_t biasBatch,
                                   int64_t biasHeads, bool backward,
                                   int smVersion, AttentionLayout layout,
                                   int64_t storedHeads, int64_t keyHeads) {
  auto [batch, heads, rows, keys, headSize, valueSize] = sizes;
  auto stored = [&](int64_t tensorHeads, int64_t length, int64_t width) {
    return AttentionGeometry::getStoredShape(layout, batch, tensorHeads, length,
                                             width);
  };
  // A grouped key and value are never head windows.
  int64_t keyStoredHeads = keyHeads < heads ? keyHeads : storedHeads;
  // Their gradients alike.
  Tensor query(nullptr, dtype, stored(storedHeads, rows, headSize));
  Tensor key(nullptr, dtype, stored(keyStoredHeads, keys, headSize));
  Tensor value(nullptr, dtype, stored(keyStoredHeads, keys, valueSize));
  // And out's gradient.
  Tensor out(nullptr, dtype, stored(heads, rows, valueSize));
  Config c{
      AttentionGeometry(query, key, value, Tensor(), Tensor(), out, layout),
      dtype, 1 / std::sqrt(double(headSize))};
  c.addOperands(
      {{kQuery, &query}, {kKey, &key}, {kValue, &value}, {kOut, &out}});
  if (backward)
    c.addOperands({{kGrad, &out},
                   {kGradQuery, &query},
                   {kGradKey, &key},
                   {kGradValue, &value}});
  c.causal = causal;
  c.biased = biasBatch > 0;
  c.biasBatch = biasBatch;
  c.biasHeads = biasHeads;
  c.smVersion = smVersion;
  std::shared_ptr<fe::graph::Graph> graph =
      backward ? makeBackward(c, /*deterministic=*/true) : makeForward(c);
  try {
    fe::error_t status = graph->validate();
    return status.is_good() ? std::string() : status.get_message();
  } catch (const std::exception &error) {
    return error.what();
  }
}

int64_t getCudnnAttentionRuns(Context &ctx) {
  const std::shared_ptr<AttentionPlans> &plans = ctx.getImpl().attentionPlans;
  return plans ? plans->runs : 0;
}

} // namespace slapo::rt::cuda
