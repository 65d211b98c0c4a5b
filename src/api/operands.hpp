// The checks every argument of the public API goes through: each operand on
// its own (dtype, memory, extents, strides, size, data), then agreement
// between operands (dtype, memory, shapes), then memory overlap of outputs.
// Each failure throws flashgen::Error(invalid_argument) with a message that
// names the argument and the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/validate.hpp"
#include "flashgen/flashgen.hpp"
#include "flashgen/sequences.hpp"

namespace flashgen::api {

bool is_valid(DType dtype);
bool is_valid(MemoryKind memory);
bool is_valid(Backend backend);
const char* memory_name(MemoryKind memory);

// Axis labels, used in messages: "k.shape[2] (heads_kv = 3)".
inline constexpr const char* kQueryAxes[4] = {"batch", "seq_q", "heads_q", "dim_qk"};
inline constexpr const char* kKeyAxes[4] = {"batch", "seq_kv", "heads_kv", "dim_qk"};
inline constexpr const char* kValueAxes[4] = {"batch", "seq_kv", "heads_kv", "dim_v"};
inline constexpr const char* kOutputAxes[4] = {"batch", "seq_q", "heads_q", "dim_v"};
inline constexpr const char* kRowStatsAxes[3] = {"batch", "heads_q", "seq_q"};
inline constexpr const char* kHeadAxes[1] = {"heads_q"};
inline constexpr const char* kBatchHeadAxes[2] = {"batch", "heads_q"};
inline constexpr const char* kMaskTensorAxes[1] = {"size"};

// One argument as the checks see it: a name, a strided extent and where it lives.
struct Operand {
  const char* name = "";
  const void* data = nullptr;
  int rank = 0;
  const std::int64_t* shape = nullptr;
  const std::int64_t* stride = nullptr;
  const char* const* axes = nullptr;
  std::size_t element_bytes = 0;
  MemoryKind memory = MemoryKind::host;
  int device = 0;
  bool output = false;
  ByteRange range;  // filled by check_operand
};

Operand operand_of(const char* name, const TensorView& t, const char* const* axes, bool output);
Operand operand_of(const char* name, const RowStatsView& t, bool output);
// A per-head fp32 vector of the options (rank 1 or 2, checked by check_options).
Operand operand_of(const char* name, const HeadVectorView& t, bool output);
// A mask tensor of the options (rank 1, checked by check_options): an input.
// `name` must outlive the operand.
Operand operand_of(const char* name, const MaskTensorView& t);
// An int32 index array (cu_seqlens, cache_seqlens, block_table): an input.
Operand operand_of(const char* name, const IndexView& t, const char* const* axes);

// The mask tensors as operands ("options.mask_tensors[\"doc\"]"): each
// checked on its own and for q's memory with the tensors.
struct MaskOperands {
  explicit MaskOperands(const Options& options) {
    names.reserve(options.mask_tensors.size());  // operands point into names
    for (const MaskTensorView& t : options.mask_tensors) {
      names.push_back("options.mask_tensors[\"" + t.name + "\"]");
      operands.push_back(operand_of(names.back().c_str(), t));
    }
    for (Operand& op : operands) given.push_back(&op);
  }
  std::vector<std::string> names;
  std::vector<Operand> operands;
  std::vector<Operand*> given;
};

// The per-head vectors the options give: ALiBi slopes and sinks (inputs),
// and for the backward the sinks' gradient (an output).
struct HeadVectors {
  HeadVectors(const Options& options, bool backward)
      : alibi(operand_of("options.alibi_slopes", options.alibi_slopes, false)),
        sinks(operand_of("options.sinks", options.sinks, false)),
        grad_sinks(operand_of("options.grad_sinks", options.grad_sinks, true)) {
    if (options.alibi_slopes.given()) given.push_back(&alibi);
    if (options.sinks.given()) given.push_back(&sinks);
    if (backward && options.grad_sinks.given()) given.push_back(&grad_sinks);
  }
  Operand alibi, sinks, grad_sinks;
  std::vector<Operand*> given;
};
// A per-head vector is [heads_q] or [batch, heads_q] of the problem q
// ([batch, seq_q, heads_q, dim]) defines; of packed sequences (varlen:
// `sequences` >= 0), [heads_q] or [sequences, heads_q].
void check_head_vector_shape(const Operand& op, const Operand& q, std::int64_t sequences = -1);

// Lower bound of an axis: batch, heads and sequences may be empty, the head
// dimensions ("dim...") may not.
std::int64_t minimum_extent(const char* axis);
std::string strides_text(const Operand& op);

// Memory kind and device on their own (agreement is checked later).
void check_placement(const Operand& op);
// Extents, strides, int64 size of every offset, and data; fills op.range.
void check_operand(Operand& op);
// A valid DType; e4m3 only where `cache_storage` (a KV cache's k_cache, v_cache).
void check_dtype(const char* name, DType dtype, bool cache_storage = false);
void check_same_dtype(const char* name, DType dtype, DType reference);
// A rank-1 index array: shape [n, 1].
void check_vector(const Operand& op);
// Every tensor lives where q lives: same memory kind, and same device for cuda.
void check_same_placement(const Operand& op, const Operand& q);
// An explicit backend (options.backend) must reach q's memory.
void check_backend_reaches(const Options& options, const Operand& q);
// A tensor's name and dtype, for the messages.
using NamedDType = std::pair<const char*, DType>;
// check_operand on each of `all`, then one dtype (dtypes[0]'s, that of q)
// and q's memory for all, then check_backend_reaches.
void check_operands_agree(std::span<Operand* const> all, std::span<const NamedDType> dtypes,
                          const Options& options, const Operand& q);
// "k.shape[0] (batch = 3) must equal q.shape[0] (batch = 2)".
void check_extent(const Operand& op, int axis, const Operand& reference, int reference_axis);
void check_same_shape(const Operand& op, const Operand& reference);
// Outputs must not alias inputs or each other, and each output element needs
// its own address.
void check_outputs_do_not_overlap(const std::vector<const Operand*>& operands);

}  // namespace flashgen::api
