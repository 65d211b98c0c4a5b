#include "cuda/user_mask.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "codegen/user_mask.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {
namespace {

using flashgen_device::kMaskCell;
using flashgen_device::MaskFault;

std::int64_t cells(std::int64_t positions) { return (positions + kMaskCell - 1) / kMaskCell; }

// Whether each batch entry has lengths of its own (packed sequences, a KV
// cache's entries), and with them its own diagonals.
bool entries_have_lengths(const Problem& p) {
  return p.sequences.given() || p.kv_cache.given();
}

// Slots of the cell ranges: one per batch entry where the mask reads b or
// the entries have lengths of their own, one per query head where it reads h.
std::int64_t batch_slots(const Problem& p) {
  return p.mask->expression.uses(mask::Op::batch) || entries_have_lengths(p) ? p.batch : 1;
}
std::int64_t head_slots(const Problem& p) {
  return p.mask->expression.uses(mask::Op::head) ? p.heads_q : 1;
}
// Words of 32 key cells per query cell in the bits of wholly attended cells.
std::int64_t full_words(const Problem& p) { return (cells(p.seq_kv) + 31) / 32; }
std::size_t full_bytes(const Problem& p) {
  return align256(sizeof(unsigned) * static_cast<std::size_t>(batch_slots(p) * head_slots(p) *
                                                              cells(p.seq_q) * full_words(p)));
}
std::size_t range_bytes(const Problem& p, std::int64_t own_positions) {
  return align256(sizeof(int) * 2 * static_cast<std::size_t>(batch_slots(p) * head_slots(p) *
                                                              cells(own_positions)));
}

// The values an integer node can take on the pairs the kernels evaluate,
// [lo, hi] inclusive; `known` false where no bound is found (a division, an
// overflow, a float).
struct Range {
  std::int64_t lo = 0, hi = 0;
  bool known = false;
};
Range exactly(std::int64_t lo, std::int64_t hi) { return {lo, hi, true}; }

// Interval arithmetic over the tree, overflow-checked.
Range range_of(const Problem& p, const mask::Expression& e, int n) {
  const mask::Node& node = e.nodes()[n];
  const auto operand = [&](int m) { return range_of(p, e, m); };
  if (node.type != mask::Type::integer) return {};
  switch (node.op) {
    case mask::Op::integer: return exactly(node.integer, node.integer);
    case mask::Op::batch: return exactly(p.mask_batch0, p.mask_batch0 + p.batch - 1);
    case mask::Op::head: return exactly(0, p.heads_q - 1);
    case mask::Op::query:  // query + sk − sq of its entry (below 0 where sq > sk)
      if (entries_have_lengths(p)) return exactly(-p.seq_q, p.seq_kv - 1);
      return exactly(p.diagonal_offset(), p.diagonal_offset() + p.seq_q - 1);
    case mask::Op::key: return exactly(0, p.seq_kv - 1);
    case mask::Op::index:  // an int32 element
      return exactly(std::numeric_limits<std::int32_t>::min(),
                     std::numeric_limits<std::int32_t>::max());
    case mask::Op::negate: {
      const Range a = operand(node.a);
      if (!a.known || a.lo == std::numeric_limits<std::int64_t>::min()) return {};
      return exactly(-a.hi, -a.lo);
    }
    case mask::Op::add:
    case mask::Op::subtract:
    case mask::Op::multiply: {
      const Range a = operand(node.a), b = operand(node.b);
      if (!a.known || !b.known) return {};
      std::int64_t lo = std::numeric_limits<std::int64_t>::max();
      std::int64_t hi = std::numeric_limits<std::int64_t>::min();
      for (std::int64_t x : {a.lo, a.hi})
        for (std::int64_t y : {b.lo, b.hi}) {
          std::int64_t z = 0;
          const bool overflow = node.op == mask::Op::add        ? __builtin_add_overflow(x, y, &z)
                                : node.op == mask::Op::subtract ? __builtin_sub_overflow(x, y, &z)
                                                                : __builtin_mul_overflow(x, y, &z);
          if (overflow) return {};
          lo = std::min(lo, z), hi = std::max(hi, z);
        }
      return exactly(lo, hi);
    }
    case mask::Op::select: {
      const Range b = operand(node.b), c = operand(node.c);
      if (!b.known || !c.known) return {};
      return exactly(std::min(b.lo, c.lo), std::max(b.hi, c.hi));
    }
    case mask::Op::divide:
    case mask::Op::modulo: return {};
    default: return exactly(0, 1);  // comparisons, ! && ||
  }
}

}  // namespace

std::string mask_arrays_of(const Problem& p) {
  return p.has_mask() ? mask_arrays_text(p.mask->expression.arrays()) : "";
}

std::size_t user_mask_scratch_bytes(const Problem& p) {
  return align256(sizeof(MaskFault)) + range_bytes(p, p.seq_q) + range_bytes(p, p.seq_kv) +
         full_bytes(p);
}

void place_user_mask(const Problem& p, DevicePtr scratch,
                     flashgen_device::AttentionParams& params) {
  const std::vector<mask::ArrayData>& arrays = p.mask->arrays;
  for (std::size_t k = 0; k < arrays.size(); ++k) {
    params.mask_arrays[k] = arrays[k].data;
    params.mask_array_sizes[k] = arrays[k].size;
    params.mask_array_strides[k] = arrays[k].stride;
  }
  params.mask_batch0 = static_cast<int>(p.mask_batch0);
  params.mask_batch_slots = static_cast<int>(batch_slots(p));
  params.mask_head_slots = static_cast<int>(head_slots(p));
  params.mask_fault = nullptr;
  params.mask_rows_q = static_cast<int>(p.seq_q);
  params.mask_rows_kv = static_cast<int>(p.seq_kv);
  const DevicePtr key_cells = scratch + align256(sizeof(MaskFault));
  const DevicePtr query_cells = key_cells + range_bytes(p, p.seq_q);
  params.mask_key_cells = reinterpret_cast<int*>(key_cells);
  params.mask_query_cells = reinterpret_cast<int*>(query_cells);
  params.mask_full_cells = reinterpret_cast<unsigned*>(query_cells + range_bytes(p, p.seq_kv));
}

LaunchShape mask_blocks_grid(const Problem& p, unsigned threads) {
  LaunchShape shape;
  const std::int64_t warps = cells(p.seq_q) * full_words(p), warps_per_cta = threads / 32;
  shape.grid[0] = static_cast<unsigned>((warps + warps_per_cta - 1) / warps_per_cta);
  shape.grid[1] = static_cast<unsigned>(head_slots(p));
  shape.grid[2] = static_cast<unsigned>(batch_slots(p));
  shape.block[0] = threads;
  return shape;
}

bool mask_may_fault(const Problem& p) {
  const mask::Expression& e = p.mask->expression;
  for (int n = 0; n < static_cast<int>(e.nodes().size()); ++n) {
    const mask::Node& node = e.nodes()[n];
    if (node.op == mask::Op::index) {
      const Range index = range_of(p, e, node.a);
      if (!index.known || index.lo < 0 || index.hi >= p.mask->arrays[node.array].size)
        return true;
    }
    if ((node.op == mask::Op::divide || node.op == mask::Op::modulo) &&
        node.type == mask::Type::integer) {
      const mask::Node& divisor = e.nodes()[node.b];
      if (divisor.op != mask::Op::integer || divisor.integer == 0 || divisor.integer == -1)
        return true;
    }
  }
  return false;
}

void check_mask_faults(const Problem& p, DevicePtr scratch, StreamHandle stream) {
  MaskFault fault{};
  copy_to_host(&fault, scratch, sizeof fault, stream);
  if (fault.inverted_first == 0) return;
  // The pair of the first fault (MaskFault's order over the grid's extents):
  // its slot's batch and head, q_idx and kv_idx.
  const std::uint64_t order = ~fault.inverted_first;
  const std::uint64_t rows_q = p.seq_q, rows_kv = p.seq_kv;
  const std::int64_t key = static_cast<std::int64_t>(order % rows_kv);
  const std::int64_t q_idx = static_cast<std::int64_t>(order / rows_kv % (rows_q + rows_kv)) -
                             static_cast<std::int64_t>(rows_q);
  const std::int64_t slot = static_cast<std::int64_t>(order / rows_kv / (rows_q + rows_kv));
  const std::int64_t batch = p.mask_batch0 + slot / head_slots(p), head = slot % head_slots(p);
  // The arrays on the host, so that the reference's evaluator words the
  // error for the recorded pair.
  std::vector<std::vector<float>> copies;  // 4-byte elements (int32 or fp32)
  mask::BoundMask host{p.mask->expression, p.mask->arrays};
  for (mask::ArrayData& a : host.arrays) {
    const std::size_t elements =
        a.size > 0 ? static_cast<std::size_t>((a.size - 1) * a.stride + 1) : 0;
    copies.emplace_back(std::max<std::size_t>(elements, 1));
    if (elements > 0)
      copy_to_host(copies.back().data(), reinterpret_cast<DevicePtr>(a.data), 4 * elements, stream);
    a.data = copies.back().data();
  }
  mask::attends(host, {batch, head, q_idx, key});
  throw Error(ErrorCode::runtime, "mask_mod: the GPU found a fault at b=" + std::to_string(batch) +
                                      ", h=" + std::to_string(head) +
                                      ", q_idx=" + std::to_string(q_idx) +
                                      ", kv_idx=" + std::to_string(key) +
                                      " that the host's evaluation does not");
}

}  // namespace flashgen::cuda
