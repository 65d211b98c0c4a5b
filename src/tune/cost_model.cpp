#include "tune/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "codegen/generate.hpp"

namespace flashgen {
namespace {

// Rates per SM per cycle on sm_80/sm_90 with mma.sync (order of magnitude;
// the ranking depends on their ratios only).
constexpr double kMmaFlopsPerCycle = 2048;  // bf16/f16 mma.sync, fp32 accumulate
constexpr double kWgmmaSpeedup = 2;         // wgmma (sm_90a) over mma.sync
constexpr double kSharedBytesPerCycle = 128;
constexpr double kExpPerCycle = 16;          // MUFU.EX2
constexpr double kAtomicBytesPerCycle = 32;  // fp32 reductions to L2
// L2 to one SM, when the copy of the next traversed tile is not hidden.
constexpr double kCopyBytesPerCycle = 42;
// Per iteration: barriers, the wait for the next tile, softmax bookkeeping.
constexpr double kIterationCycles = 300;
// Warps an SM needs resident before latency stops mattering; throughput
// grows as w / (w + kLatencyWarps).
constexpr double kLatencyWarps = 4;
// Registers not in the tiles: addresses, loop counters, row statistics,
// fragments in flight (fitted to ptxas's counts for sm_90a at D = 128).
constexpr int kBaseRegisters = 64;
constexpr int kMaxRegisters = 255;
// An estimate this far past the register file means ptxas will spill; such
// a kernel is ranked as this many times slower, behind every likely fit.
constexpr int kSpillMargin = 16;
constexpr double kSpillPenalty = 4;
constexpr int kRegisterGranule = 8;                     // allocation unit per thread
constexpr std::int64_t kReservedSharedPerBlock = 1024;  // the driver's per-CTA reserve
constexpr double kElementBytes = 2;

int round_up(int a, int b) { return (a + b - 1) / b * b; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Columns of the split output dimension a CTA computes.
struct Widths {
  int dqk, dv;   // padded to 16
  int chunk_qk;  // of dQ / dK per CTA
  int chunk_v;   // of O / dV per CTA
};

Widths widths_of(const KernelSpec& spec, const TuningParams& t) {
  const int chunks = head_chunks_of(spec, t);
  Widths w;
  w.dqk = round_up(spec.dim_qk, 16);
  w.dv = round_up(spec.dim_v, 16);
  w.chunk_qk = chunks > 1 ? chunk_width(spec.dim_qk, chunks) : w.dqk;
  w.chunk_v = chunks > 1 ? chunk_width(spec.dim_v, chunks) : w.dv;
  return w;
}

// The work of one CTA iteration (rows x cols block of scores).
struct Iteration {
  double flops = 0, shared_bytes = 0, exps = 0, atomic_bytes = 0;
  double exposed_copy_bytes = 0;  // traversed tiles copied while nothing else runs
  double mma_flops_per_cycle = kMmaFlopsPerCycle;
};

Iteration iteration_of(const KernelSpec& spec, const TuningParams& t) {
  const Widths w = widths_of(spec, t);
  const double rows = t.block_rows, cols = t.block_cols;
  // Readers of each traversed tile: every warp of mma.sync, every warpgroup
  // of wgmma; warpgroups splitting the head dims read disjoint halves.
  const double warps = t.split == WarpgroupSplit::dims ? 1 : t.wgmma ? t.warps / 4.0 : t.warps;
  Iteration it;
  it.exps = rows * cols;
  if (t.wgmma) it.mma_flops_per_cycle *= kWgmmaSpeedup;
  switch (spec.kind) {
    case KernelKind::forward: {
      // S = Q·Kᵀ over Dqk, O += P·V over the value chunk. Every warp reads all
      // of K and V; Q is re-read unless cached; K, V tiles are stored once.
      const double k_width = w.dqk + w.chunk_v;
      it.flops = 2 * rows * cols * k_width;
      it.shared_bytes = kElementBytes * (warps * cols * k_width + cols * k_width +
                                         ((t.cached & kCacheQ) ? 0 : rows * w.dqk));
      break;
    }
    case KernelKind::backward_query: {
      // S = Q·Kᵀ, dP = dO·Vᵀ, dQ += dS·K (the chunk).
      const double k_width = w.dqk + w.dv + w.chunk_qk;
      it.flops = 2 * rows * cols * k_width;
      it.shared_bytes =
          kElementBytes * (warps * cols * k_width + cols * (w.dqk + w.dv) + rows * (w.dqk + w.dv));
      break;
    }
    case KernelKind::backward_key_value:
    case KernelKind::backward_atomic: {
      // Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO, dK += dSᵀ·Q (chunks).
      double k_width = w.dqk + w.dv + w.chunk_v + w.chunk_qk;
      double stored = cols * (w.dqk + w.dv);
      if (spec.kind == KernelKind::backward_atomic) {
        // dQ partial = dS·K through a dSᵀ tile in shared memory, added to fp32 dQ.
        k_width += w.dqk;
        stored += rows * cols;
        it.atomic_bytes = sizeof(float) * cols * w.dqk;
      }
      // The A operands K and V (rows of keys) are read per GEMM; with
      // split=dims the dV CTA reads K only, the dK CTA both, unless held in
      // registers (cache=K: the dV CTA's K, cache=V: the dK CTA's V).
      double operand_rows = rows * (w.dqk + w.dv);
      if (t.split == WarpgroupSplit::dims)
        operand_rows = rows * (w.dqk * ((t.cached & kCacheK) ? 0.5 : 1.0) +
                               w.dv * ((t.cached & kCacheV) ? 0.0 : 0.5));
      it.flops = 2 * rows * cols * k_width;
      it.shared_bytes = kElementBytes * (warps * cols * k_width + stored + operand_rows);
      break;
    }
    default:  // the row kernels (is_row_kernel): no tiles
      break;
  }
  // The backward kernels splitting the head dims read a stage until the
  // product of the next block: with two stages the producer cannot copy
  // ahead, so each traversed tile's copy is exposed (measured: a third
  // stage 20-40% faster on the H200, docs/decisions.md).
  if (t.split == WarpgroupSplit::dims && spec.kind != KernelKind::forward &&
      backward_dims_split_stages(spec, t) <= 2)
    it.exposed_copy_bytes = kElementBytes * cols * (w.dqk + w.dv);
  return it;
}

double iteration_cycles(const Iteration& it, int resident_ctas) {
  const double pipes =
      std::max(it.flops / it.mma_flops_per_cycle, it.shared_bytes / kSharedBytesPerCycle);
  // Other resident CTAs fill this one's barrier waits.
  return pipes + it.exps / kExpPerCycle + it.atomic_bytes / kAtomicBytesPerCycle +
         it.exposed_copy_bytes / kCopyBytesPerCycle + kIterationCycles / resident_ctas;
}

// Iterations of each CTA row block over the traversed sequence (causal:
// only blocks with a visible pair).
struct Blocks {
  std::int64_t count = 0;  // row blocks per (batch, head, chunk)
  double mean_iterations = 0, max_iterations = 0;
};

Blocks blocks_of(const KernelSpec& spec, const TuningParams& t, const CostProblem& p) {
  const bool over_keys =
      spec.kind == KernelKind::backward_key_value || spec.kind == KernelKind::backward_atomic;
  const std::int64_t own = over_keys ? p.seq_kv : p.seq_q;
  const std::int64_t other = over_keys ? p.seq_q : p.seq_kv;
  const std::int64_t offset = p.seq_kv - p.seq_q;  // query i sees keys j <= i + offset
  // The key/value kernels loop over the query heads of their group.
  const double group = over_keys ? double(p.heads_q) / double(p.heads_kv) : 1.0;
  Blocks b;
  b.count = ceil_div(own, t.block_rows);
  double total = 0;
  for (std::int64_t i = 0; i < b.count; ++i) {
    const std::int64_t first = i * t.block_rows, last = std::min(own, first + t.block_rows) - 1;
    std::int64_t lo = 0, hi = other - 1;  // traversed rows with a visible pair
    if (spec.causal) {
      if (over_keys)
        lo = std::max<std::int64_t>(0, first - offset);  // queries i >= j - offset
      else
        hi = std::min(other - 1, last + offset);  // keys j <= i + offset
    }
    double n = 0;
    if (hi >= lo) n = double(ceil_div(hi + 1, t.block_cols) - lo / t.block_cols) * group;
    total += n;
    b.max_iterations = std::max(b.max_iterations, n);
  }
  b.mean_iterations = b.count > 0 ? total / double(b.count) : 0;
  return b;
}

// Registers per thread before the cap of 255.
int register_demand(const KernelSpec& spec, const TuningParams& t) {
  const Widths w = widths_of(spec, t);
  const int rt = t.row_tiles();
  // An m16 x n tile of fp32 holds n / 2 registers per thread per row tile;
  // an m16 x k16 A fragment of 16-bit values, 4.
  int tiles = 0;
  switch (spec.kind) {
    case KernelKind::forward:
      tiles = rt * (w.chunk_v / 2 + t.block_cols / 2) + ((t.cached & kCacheQ) ? rt * w.dqk / 4 : 0);
      break;
    case KernelKind::backward_query:
      tiles = rt * (w.chunk_qk / 2 + 2 * (t.block_cols / 2));  // dQ, S, dP
      break;
    case KernelKind::backward_key_value:
      tiles = rt * (w.chunk_qk / 2 + w.chunk_v / 2 + 2 * (t.block_cols / 2));  // dK, dV, Sᵀ, dPᵀ
      break;
    case KernelKind::backward_atomic:
      // and the dS tile handed to the dQ GEMM
      tiles = rt * (w.chunk_qk / 2 + w.chunk_v / 2 + 2 * (t.block_cols / 2) + t.block_cols / 4);
      break;
    default:  // the row kernels (is_row_kernel): no tiles
      break;
  }
  return kBaseRegisters + tiles;
}

bool likely_spills(const KernelSpec& spec, const TuningParams& t) {
  return register_demand(spec, t) > kMaxRegisters + kSpillMargin;
}

int resident_ctas(const KernelSpec& spec, const TuningParams& t, const CostDevice& d) {
  const std::int64_t smem = std::int64_t(shared_bytes(spec, t)) + kReservedSharedPerBlock;
  const int threads = t.warps * 32;
  const int registers = round_up(estimated_registers(spec, t), kRegisterGranule);
  std::int64_t n = d.max_blocks_per_sm;
  n = std::min<std::int64_t>(n, d.shared_per_sm / smem);
  n = std::min<std::int64_t>(n, d.max_threads_per_sm / threads);
  n = std::min<std::int64_t>(n, d.registers_per_sm / (std::int64_t(registers) * threads));
  return static_cast<int>(std::max<std::int64_t>(n, 1));
}

double latency_efficiency(double warps) { return warps / (warps + kLatencyWarps); }

}  // namespace

int estimated_registers(const KernelSpec& spec, const TuningParams& t) {
  return std::min(kMaxRegisters, register_demand(spec, t));
}

double estimated_cycles(const KernelSpec& spec, const TuningParams& t, const CostProblem& p,
                        const CostDevice& d) {
  const bool over_keys =
      spec.kind == KernelKind::backward_key_value || spec.kind == KernelKind::backward_atomic;
  const Blocks blocks = blocks_of(spec, t, p);
  const std::int64_t heads = over_keys ? p.heads_kv : p.heads_q;
  const std::int64_t ctas = blocks.count * heads * p.batch * head_chunks_of(spec, t);
  const int per_sm = resident_ctas(spec, t, d);
  const std::int64_t slots = std::int64_t(d.sm_count) * per_sm;
  const double waves = double(ceil_div(ctas, slots));
  const double cycles = iteration_cycles(iteration_of(spec, t), per_sm);
  // Each wave: per_sm CTAs share an SM; the mean CTA sets the throughput,
  // the longest one the critical path.
  const double throughput = waves * per_sm * blocks.mean_iterations * cycles /
                            latency_efficiency(double(per_sm) * t.warps);
  const double critical = blocks.max_iterations * cycles / latency_efficiency(t.warps);
  return std::max(throughput, critical) * (likely_spills(spec, t) ? kSpillPenalty : 1.0);
}

}  // namespace flashgen
