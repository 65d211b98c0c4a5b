// Pipelines whose producer and consumers are different warps: shared-memory
// barriers (mbarrier, sm_90), the stage pipeline built on them (a consumer
// waits for the phase of a stage's "full" barrier, the producer for the phase
// of its "empty" barrier, and no warp waits for the whole CTA), and the
// register hand-over between the roles (setmaxnreg, sm_90a).
#pragma once

#include "common.cuh"
#include "copy/tile_copy.cuh"
#include "arch/wgmma.cuh"

namespace flashgen_device {

// One thread initialises; a __syncthreads() must follow before any use.
__device__ __forceinline__ void mbarrier_init(u64* barrier, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(arrivals)
               : "memory");
}

// Counts one arrival (release: the caller's earlier shared-memory writes are
// visible to a thread whose wait observes the phase completing).
__device__ __forceinline__ void mbarrier_arrive(u64* barrier) {
  asm volatile(
      "{\n"
      "  .reg .b64 state;\n"
      "  mbarrier.arrive.shared::cta.b64 state, [%0];\n"
      "}\n" ::"r"(shared_address(barrier))
      : "memory");
}

// Returns once the phase with this parity (0 for the first, then 1, 0, ...)
// has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(u64* barrier, u32 parity) {
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "waiting:\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra waiting;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// Warpgroup-wide: lowers (dec) or raises (inc) the registers each thread of
// the calling warpgroup holds, so warpgroups with different roles can split
// the register file unevenly (sm_90a).
template <int kRegisters>
__device__ __forceinline__ void set_max_registers_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void set_max_registers_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// The warps of a producer warpgroup that copy: its first with TMA (one
// thread issues every copy), all four with cp.async (one warp's cp.async
// copies could not keep up with the tensor cores).
template <bool kTma>
struct ProducerCopies {
  static constexpr int kWarps = kTma ? 1 : 4;
  static constexpr int kThreads = kWarps * 32;
  // Arrivals that fill a stage of copies alone (StagePipeline::init): every
  // cp.async thread, or the one thread that issues the TMA copies.
  static constexpr int kFullArrivals = kTma ? 1 : kThreads;
};

// The register file split between one producer warpgroup, which keeps few
// registers, and kConsumerWarps computing warps, which share the rest
// (setmaxnreg, per warpgroup). The pool is what the CTA was launched with:
// ptxas gives a kernel with setmaxnreg the most registers its launch bounds
// allow (65536 / threads, in steps of 8: 168 for 384 threads), and a
// setmaxnreg.inc asking for more than the others released waits forever.
// Without the split three computing warpgroups and a producer would all be
// held to 128 registers per thread. kProducerFloor: the least the producer
// keeps (ptxas holds its code to what it keeps: a producer whose copies take
// more address arithmetic, a copy per slice, spills below 32).
template <int kConsumerWarps, int kProducerFloor = 24>
struct RegisterSplit {
  static constexpr int kRegisterFile = 65536;  // 32-bit registers per SM (sm_90)
  static constexpr int kProducerThreads = 128;  // one warpgroup
  static constexpr int kThreads = kConsumerWarps * 32 + kProducerThreads;
  static constexpr int kMostPerThread = 248;  // 255 rounded down to setmaxnreg's steps of 8
  static constexpr int kLaunch = kRegisterFile / kThreads / 8 * 8 < kMostPerThread
                                     ? kRegisterFile / kThreads / 8 * 8
                                     : kMostPerThread;
  static constexpr int kPool = kLaunch * kThreads;
  static_assert(kProducerFloor >= 24 && kProducerFloor % 8 == 0, "setmaxnreg's least is 24");
  static constexpr int kLeastProducer = kProducerFloor;
  static constexpr int kMostConsumer = 240;  // leaves ptxas headroom below 255
  static constexpr int kShareOfRest =
      (kPool - kProducerThreads * kLeastProducer) / (kConsumerWarps * 32) / 8 * 8;
  static constexpr int kConsumer = kShareOfRest < kMostConsumer ? kShareOfRest : kMostConsumer;
  // The producer keeps what the computing warps leave (its copies' address
  // arithmetic spills below about 32).
  static constexpr int kProducer =
      (kPool - kConsumer * kConsumerWarps * 32) / kProducerThreads / 8 * 8 < 56
          ? (kPool - kConsumer * kConsumerWarps * 32) / kProducerThreads / 8 * 8
          : 56;
  static_assert(kConsumer * kConsumerWarps * 32 + kProducer * kProducerThreads <= kPool,
                "the computing warps would wait for registers no warp releases");
  static_assert(kConsumer >= kLaunch, "the computing warps would lose registers");

  // Every warp calls this after the CTA's last __syncthreads: the producer
  // warpgroup (warps kConsumerWarps on) lowers its registers and gets true,
  // the computing warps raise theirs and get false.
  static __device__ __forceinline__ bool is_producer(int warp) {
    if (warp >= kConsumerWarps) {
      set_max_registers_dec<kProducer>();
      return true;
    }
    set_max_registers_inc<kConsumer>();
    return false;
  }
};

// Named barriers (bar.sync / bar.arrive) between warpgroups: `threads`
// threads in all take part, the arriving ones do not wait, and the
// shared-memory writes an arriving thread made before are visible to the
// waiting ones after. Barrier 0 is __syncthreads()'s.
__device__ __forceinline__ void named_barrier_sync(int barrier, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int barrier, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(barrier), "r"(threads) : "memory");
}

// A pipeline of kStages shared-memory stages between one producer warp and
// kConsumerWarps computing warps. Block j lives in stage j % kStages. The
// producer keeps two blocks' copies in flight: it issues block j, then waits
// for its own copies of block j-1 (cp.async groups), makes them visible to
// the tensor cores' async proxy and arrives on block j-1's "full" barrier;
// before reusing a stage it waits until every consumer warp arrived on the
// stage's "empty" barrier for the block that was there. With cp.async
// (produce) kStages >= 3: block j-1 is signalled while the consumers may
// still read block j-2; TMA copies signal their own stage
// (produce_with_transactions), so two stages will do.
template <int kStages>
struct StagePipeline {
  static_assert(kStages >= 2, "a stage to read while another fills");
  u64 full[kStages];
  u64 empty[kStages];

  // One thread; a __syncthreads() must follow before any use. A stage is
  // full once `full_arrivals` threads have arrived on its full barrier:
  // every producer thread that wrote into it (produce(): each thread of the
  // copying warps; a TMA producer that also stores row statistics: each
  // lane of its warp), or the one thread that issued its TMA copies. It is
  // free again once `empty_arrivals` threads have arrived on its empty
  // barrier: a thread a consumer warp (release()), or each consumer thread
  // (release_each()).
  __device__ __forceinline__ void init(int empty_arrivals, int full_arrivals = 1) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], full_arrivals);
      mbarrier_init(&empty[s], empty_arrivals);
    }
  }

  // Consumers: block j has landed in its stage.
  __device__ __forceinline__ void wait_full(int j) {
    mbarrier_wait(&full[j % kStages], (j / kStages) & 1);
  }
  // Consumers: this warp no longer reads block j's stage (through the
  // tensor cores: its lanes read no plain value out of it).
  __device__ __forceinline__ void release(int j, int lane) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[j % kStages]);
  }
  // Consumers whose lanes read plain values out of block j's stage (row
  // statistics): each thread arrives after its own reads, so the producer's
  // next stores into the stage are ordered after every one of them by the
  // barrier alone. A warp barrier and one lane's arrival order them too (the
  // PTX memory model makes bar.warp.sync order the lanes' accesses before
  // lane 0's release), but compute-sanitizer's racecheck sees only the
  // arriving thread's accesses and reports the others as hazards
  // (tests/sanitize/handover_pattern.cu shows both).
  __device__ __forceinline__ void release_each(int j) { mbarrier_arrive(&empty[j % kStages]); }
  // A producer thread's loop (every thread of the copying warps runs it,
  // init()'s full_arrivals of them): issue(j, stage) issues this thread's
  // share of the cp.async copies (and of any plain shared-memory stores) of
  // block j into `stage`.
  template <class Issue>
  __device__ __forceinline__ void produce(int n_blocks, Issue issue) {
    static_assert(kStages >= 3, "block j-1 is signalled after block j is issued");
    for (int j = 0; j < n_blocks; ++j) {
      wait_empty(j);
      issue(j, j % kStages);
      cp_async_commit();
      if (j > 0) {
        cp_async_wait<1>();  // block j-1's copies have landed
        signal_full(j - 1);
      }
    }
    if (n_blocks > 0) {
      cp_async_wait<0>();
      signal_full(n_blocks - 1);
    }
  }

  // The same for copies that report to the barrier themselves (TMA), by
  // the producer warp: issue(j, stage, full) fills `stage` with block j and
  // makes one arrival on `full` that announces the bytes still to land
  // (mbarrier_arrive_expect_bytes) after any plain stores of the warp.
  template <class Issue>
  __device__ __forceinline__ void produce_with_transactions(int n_blocks, Issue issue) {
    for (int j = 0; j < n_blocks; ++j) {
      wait_empty(j);
      issue(j, j % kStages, &full[j % kStages]);
    }
  }

  // The producer: block j's stage is free (it held block j - kStages, which
  // every consumer warp has released).
  __device__ __forceinline__ void wait_empty(int j) {
    if (j >= kStages) mbarrier_wait(&empty[j % kStages], (j / kStages + 1) & 1);
  }
  __device__ __forceinline__ u64* full_barrier(int j) { return &full[j % kStages]; }

  // Every thread that wrote into block j's stage arrives itself: its
  // arrival releases its own writes (cp.async data it waited for, plain
  // stores) to the consumers' acquiring wait, with no warp barrier in
  // between for a race checker to see through.
  __device__ __forceinline__ void signal_full(int j) {
    fence_async_shared();  // this thread's writes, to the async proxy
    mbarrier_arrive(&full[j % kStages]);
  }
};

// The stages a second producer warp has fixed after their copies landed
// (token-row tiles, whose other heads' columns it zeroes:
// kernels/forward/wgmma_producer.cuh): a pipeline whose full barriers the
// computing warps wait for instead of the copies' (its empty ones unused);
// none where kFixed is false (an empty base).
template <bool kFixed, int kStages>
struct FixedStages {};
template <int kStages>
struct FixedStages<true, kStages> {
  StagePipeline<kStages> fixed;

  // The fixing warp's loop: for each of n_blocks blocks, once its copies
  // have landed (`landed`'s full barrier), fix(stage) zeroes the other
  // heads' columns of its stage's tiles, then each lane arrives (after its
  // own stores) on the stage's `fixed` barrier.
  template <class Fix>
  __device__ __forceinline__ void fix_each(StagePipeline<kStages>& landed, int n_blocks, Fix fix) {
    fix_each_block(n_blocks, [&](int j) {
      landed.wait_full(j);
      fix(j % kStages);
    });
  }

  // The same where the tiles of a block land in pipelines of their own,
  // each at least kStages deep (one refills a stage only once the computing
  // warps have released it, after their wait here for the block it held):
  // land_and_fix(j) waits for block j's copies and zeroes them.
  template <class LandAndFix>
  __device__ __forceinline__ void fix_each_block(int n_blocks, LandAndFix land_and_fix) {
    for (int j = 0; j < n_blocks; ++j) {
      land_and_fix(j);
      fixed.signal_full(j);
    }
  }
};

}  // namespace flashgen_device
