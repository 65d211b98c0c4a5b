// The checks every argument of the public API goes through, one operand at a
// time and between operands (see operands.hpp).
#include "api/operands.hpp"

#include <span>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace flashgen::api {

void fail(const char* format, ...) {
  char message[1024];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(message, sizeof(message), format, arguments);
  va_end(arguments);
  throw Error(ErrorCode::invalid_argument, message);
}

bool is_valid(DType dtype) {
  const int value = static_cast<int>(dtype);
  return value >= static_cast<int>(DType::f16) && value <= static_cast<int>(DType::e4m3);
}

bool is_valid(MemoryKind memory) {
  const int value = static_cast<int>(memory);
  return value == static_cast<int>(MemoryKind::host) || value == static_cast<int>(MemoryKind::cuda);
}

bool is_valid(Backend backend) {
  const int value = static_cast<int>(backend);
  return value >= static_cast<int>(Backend::automatic) && value <= static_cast<int>(Backend::cpu);
}

const char* memory_name(MemoryKind memory) {
  return memory == MemoryKind::cuda ? "cuda" : "host";
}

namespace {

// Every view type carries data, shape, stride, memory and device under the
// same names; the rest is the caller's.
template <class View>
Operand view_operand(const char* name, const View& t, int rank, const char* const* axes,
                     std::size_t element_bytes, bool output) {
  Operand op;
  op.name = name;
  op.data = t.data;
  op.rank = rank;
  op.shape = t.shape;
  op.stride = t.stride;
  op.axes = axes;
  op.element_bytes = element_bytes;
  op.memory = t.memory;
  op.device = t.device;
  op.output = output;
  return op;
}

}  // namespace

Operand operand_of(const char* name, const TensorView& t, const char* const* axes, bool output) {
  return view_operand(name, t, 4, axes, size_of(t.dtype), output);
}

Operand operand_of(const char* name, const RowStatsView& t, bool output) {
  return view_operand(name, t, 3, kRowStatsAxes, sizeof(float), output);
}

Operand operand_of(const char* name, const HeadVectorView& t, bool output) {
  return view_operand(name, t, t.rank, t.rank == 1 ? kHeadAxes : kBatchHeadAxes, sizeof(float),
                      output);
}

// Lower bound of each axis: batch, heads and sequences may be empty (the
// outputs are then empty, or zeros), the head dimensions may not.
std::int64_t minimum_extent(const char* axis) {
  return std::strncmp(axis, "dim", 3) == 0 ? 1 : 0;
}

std::string strides_text(const Operand& op) {
  std::string text = "{";
  for (int i = 0; i < op.rank; ++i) {
    text += std::to_string(op.stride[i]);
    if (i + 1 < op.rank) text += ", ";
  }
  return text + "}";
}

// Memory kind and device on their own (agreement is checked later).
void check_placement(const Operand& op) {
  if (!is_valid(op.memory))
    fail("%s.memory (%d) is not a valid MemoryKind (host = 0, cuda = 1)", op.name,
         static_cast<int>(op.memory));
  if (op.memory == MemoryKind::cuda && op.device < 0)
    fail("%s.device (%d) must be >= 0 for cuda memory", op.name, op.device);
}

// Extents, strides, int64 size of every offset, and data; fills op.range.
void check_operand(Operand& op) {
  check_placement(op);
  for (int i = 0; i < op.rank; ++i) {
    const std::int64_t minimum = minimum_extent(op.axes[i]);
    if (op.shape[i] < minimum)
      fail("%s.shape[%d] (%s = %lld) must be >= %lld", op.name, i, op.axes[i],
           static_cast<long long>(op.shape[i]), static_cast<long long>(minimum));
  }
  for (int i = 0; i < op.rank; ++i) {
    if (op.stride[i] < 0)
      fail("%s.stride[%d] (%lld) must be >= 0: negative strides are not supported", op.name, i,
           static_cast<long long>(op.stride[i]));
  }
  std::int64_t count = 1;       // number of elements
  std::int64_t max_offset = 0;  // element offset of the last element
  for (int i = 0; i < op.rank; ++i) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(count, op.shape[i], &count) ||
        __builtin_mul_overflow(op.shape[i] > 0 ? op.shape[i] - 1 : 0, op.stride[i], &reach) ||
        __builtin_add_overflow(max_offset, reach, &max_offset))
      fail("%s: the element count or an element offset overflows int64 (strides %s)", op.name,
           strides_text(op).c_str());
  }
  if (count == 0) {
    op.range = {};
    return;  // an empty tensor is never read or written; its data may be null
  }
  std::int64_t bytes = 0;
  if (__builtin_add_overflow(max_offset, 1, &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<std::int64_t>(op.element_bytes), &bytes))
    fail("%s: the byte offset of its last element overflows int64 (strides %s)", op.name,
         strides_text(op).c_str());
  if (op.data == nullptr)
    fail("%s.data is null (only an empty tensor, numel 0, may have null data)", op.name);
  const auto begin = reinterpret_cast<std::uintptr_t>(op.data);
  std::uintptr_t end = 0;
  if (__builtin_add_overflow(begin, static_cast<std::uintptr_t>(bytes), &end))
    fail("%s: data + the byte offset of its last element overflows the address space", op.name);
  op.range = {begin, end};
}

void check_dtype(const char* name, DType dtype, bool cache_storage) {
  if (!is_valid(dtype))
    fail("%s.dtype (%d) is not a valid DType (f16 = 0, bf16 = 1, f32 = 2, e4m3 = 3)", name,
         static_cast<int>(dtype));
  if (dtype == DType::e4m3 && !cache_storage)
    fail("%s.dtype (e4m3) stores a KV cache only (forward_with_kvcache's k_cache and v_cache); "
         "attention takes f16, bf16 or f32",
         name);
}

void check_same_dtype(const char* name, DType dtype, DType reference) {
  if (dtype != reference)
    fail("%s.dtype (%s) must equal q.dtype (%s): all tensors share one dtype", name,
         to_string(dtype), to_string(reference));
}

// Every tensor lives where q lives: same memory kind, and same device for cuda.
void check_same_placement(const Operand& op, const Operand& q) {
  if (op.memory != q.memory)
    fail("%s.memory (%s) must equal q.memory (%s): all tensors live in one memory", op.name,
         memory_name(op.memory), memory_name(q.memory));
  if (op.memory == MemoryKind::cuda && op.device != q.device)
    fail("%s.device (%d) must equal q.device (%d): all tensors live on one device", op.name,
         op.device, q.device);
}

// "k.shape[0] (batch = 3) must equal q.shape[0] (batch = 2)".
void check_extent(const Operand& op, int axis, const Operand& reference, int reference_axis) {
  if (op.shape[axis] != reference.shape[reference_axis])
    fail("%s.shape[%d] (%s = %lld) must equal %s.shape[%d] (%s = %lld)", op.name, axis,
         op.axes[axis], static_cast<long long>(op.shape[axis]), reference.name, reference_axis,
         reference.axes[reference_axis], static_cast<long long>(reference.shape[reference_axis]));
}

void check_same_shape(const Operand& op, const Operand& reference) {
  for (int i = 0; i < op.rank; ++i) check_extent(op, i, reference, i);
}

// Outputs must not alias inputs or each other, and each output element needs
// its own address (a zero stride on an output would make threads race).
void check_outputs_do_not_overlap(const std::vector<const Operand*>& operands) {
  for (const Operand* out : operands) {
    if (!out->output || out->range.empty()) continue;
    if (!elements_are_distinct(out->rank, out->shape, out->stride))
      fail("%s.stride %s makes distinct elements share memory: every output element needs its "
           "own address",
           out->name, strides_text(*out).c_str());
  }
  for (std::size_t i = 0; i < operands.size(); ++i) {
    for (std::size_t j = 0; j < operands.size(); ++j) {
      const Operand& a = *operands[i];
      const Operand& b = *operands[j];
      if (i == j || !a.output || (b.output && j < i)) continue;  // each pair once
      if (a.range.overlaps(b.range))
        fail("%s overlaps %s in memory (bytes [%#llx, %#llx) and [%#llx, %#llx)): outputs must "
             "not share memory with inputs or other outputs",
             a.name, b.name, static_cast<unsigned long long>(a.range.begin),
             static_cast<unsigned long long>(a.range.end),
             static_cast<unsigned long long>(b.range.begin),
             static_cast<unsigned long long>(b.range.end));
    }
  }
}

Operand operand_of(const char* name, const MaskTensorView& t) {
  Operand op;
  op.name = name;
  op.data = t.data;
  op.rank = 1;
  op.shape = &t.size;
  op.stride = &t.stride;
  op.axes = kMaskTensorAxes;
  op.element_bytes = 4;  // int32 or fp32
  op.memory = t.memory;
  op.device = t.device;
  return op;
}

// [heads_q] or [batch, heads_q] of the problem q defines.
void check_head_vector_shape(const Operand& op, const Operand& q, std::int64_t sequences) {
  if (op.rank == 1) {
    check_extent(op, 0, q, 2);  // heads_q
    return;
  }
  if (sequences < 0)
    check_extent(op, 0, q, 0);  // batch
  else if (op.shape[0] != sequences)
    fail("%s.shape[0] (%lld) must equal the number of sequences (%lld, cu_seqlens_q.shape[0] - "
         "1): a row per sequence",
         op.name, static_cast<long long>(op.shape[0]), static_cast<long long>(sequences));
  check_extent(op, 1, q, 2);  // heads_q
}

Operand operand_of(const char* name, const IndexView& t, const char* const* axes) {
  return view_operand(name, t, 2, axes, sizeof(std::int32_t), false);
}

// A rank-1 index array: shape [n, 1].
void check_vector(const Operand& op) {
  if (op.shape[1] != 1)
    fail("%s.shape[1] (%lld) must be 1: %s is a vector", op.name,
         static_cast<long long>(op.shape[1]), op.name);
}

// An explicit backend must be able to reach the tensors' memory.
void check_backend_reaches(const Options& options, const Operand& q) {
  if (options.backend == Backend::cpu && q.memory == MemoryKind::cuda)
    fail("options.backend (cpu) cannot read tensors in cuda memory (q.memory = cuda): pass host "
         "tensors or use Backend::cuda or Backend::automatic");
  if (options.backend == Backend::cuda && q.memory == MemoryKind::host)
    fail("options.backend (cuda) needs tensors in cuda memory (q.memory = host): pass device "
         "tensors or use Backend::cpu or Backend::automatic");
}

// The rules a call's operands share, in the order the messages come: each
// operand on its own, then one dtype (that of q) and one memory for all, then
// whether an explicit backend reaches that memory.
void check_operands_agree(std::span<Operand* const> all, std::span<const NamedDType> dtypes,
                          const Options& options, const Operand& q) {
  for (Operand* op : all) check_operand(*op);
  for (const auto& [name, dtype] : dtypes) check_same_dtype(name, dtype, dtypes[0].second);
  for (Operand* op : all) check_same_placement(*op, q);
  check_backend_reaches(options, q);
}

}  // namespace flashgen::api
