// The wgmma forward for wide heads without recomputing S (tuning
// split=dims): a CTA of two warpgroups owns 64 query rows, and the
// warpgroups split the head dims instead of the rows.
//
//   S_g = Q[:, half g of Dqk]·K[:, half g]ᵀ   wgmma, each warpgroup its half
//   S   = S_0 + S_1                           through shared memory: thread t
//                                             of each warpgroup holds the same
//                                             (row, key) positions
//   P   = exp2(S·scale·log2e − m)             in both (a + b = b + a exactly,
//                                             so both softmaxes agree)
//   O_g += P·V[:, half g of Dv]               wgmma, each warpgroup its half
//
// The alternative for Dv past 256, CTAs that each own a 256-column chunk of
// Dv, computes S once per chunk (1.5× the tensor work at D = 384 and 512).
// Q and K are zero-filled to a multiple of 32 columns, V likewise, so both
// warpgroups run the same instructions. Rows aligned to 4 bytes or more; K
// and V in two stages as in forward_wgmma.cuh, whose softmax, masking and
// stores this kernel shares.
#pragma once

#include "forward_wgmma.cuh"

namespace flashgen_device {

// C (generated): as for ForwardWgmma, with kWarps = 8 and kHeadChunks = 1.
template <class C>
struct ForwardWgmmaSplit {
  static constexpr int E = C::kElement;
  static constexpr int kThreads = 256;                     // two warpgroups
  static constexpr int kBlockM = 64;                       // query rows per CTA
  static constexpr int kBlockN = C::kBlockN;
  static constexpr int kDimQK = round_up(C::kDimQK, 32);   // zero-filled
  static constexpr int kDimV = round_up(C::kDimV, 32);     // zero-filled
  static constexpr int kHalfQK = kDimQK / 2, kHalfV = kDimV / 2;
  static constexpr int kStages = 2;
  static constexpr int kScoreFloats = kBlockN / 2;  // a thread's S fragment
  static_assert(C::kWarps == 8 && C::kHeadChunks == 1, "two warpgroups over all of Dv");
  static_assert(C::kVec >= 2, "cp.async straight into the tiles");
  static_assert(kHalfV <= 256 && kBlockN <= 256, "wgmma n is 16..256");

  // ForwardWgmma over one warpgroup's half of the value columns: its
  // softmax, masking, fragment packing and stores.
  struct HalfConfig : C {
    static constexpr int kDimV = ForwardWgmmaSplit::kHalfV;
    static constexpr int kHeadChunks = 1;
  };
  typedef ForwardWgmma<HalfConfig> Half;

  struct SharedStorage {
    u16 q[kBlockM * kDimQK];           // core-matrix layout (wgmma.cuh)
    u16 k[kStages][kBlockN * kDimQK];
    u16 v[kStages][kBlockN * kDimV];
    // Partial scores: [warpgroup][fragment float][thread]. One buffer: a
    // warpgroup writes its half again only after the next block's barrier,
    // which the other reaches after reading it.
    float partial[2][kScoreFloats][128];
  };

  static __device__ void run(const AttentionParams& p, unsigned char* shared_bytes) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(shared_bytes);
    const int thread = threadIdx.x, lane = thread & 31, warp = thread >> 5;
    const int group = warp / 4, group_thread = thread & 127;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / p.group_size;
    const int row0 = blockIdx.x * kBlockM;
    const int warp_row0 = row0 + (warp % 4) * 16;  // both warpgroups cover the same rows
    const int n_blocks = key_blocks_for_rows<C::kCausal, kBlockN>(p, row0, kBlockM);

    const u16* q = head_slice<const u16>(p.q, batch, head) + row0 * p.q.stride_seq;
    const u16* k = head_slice<const u16>(p.k, batch, kv_head);
    const u16* v = head_slice<const u16>(p.v, batch, kv_head);

    // Copy groups as in ForwardWgmma with two stages: G(j) = {K[j+1], V[j]}
    // is issued at the top of iteration j; the prologue issues Q and K[0].
    copy_core_matrix_tile<kBlockM, kDimQK, C::kVec, kThreads>(smem.q, q, p.q.stride_seq,
                                                              p.seq_q - row0, C::kDimQK, thread);
    load_ahead(smem, k, v, p, 0, n_blocks, thread);

    // This warpgroup's half: of S's contraction (columns g·kHalfQK on of Q
    // and K) and of O's columns (g·kHalfV on of V).
    const u64 q_desc = matrix_descriptor(smem.q + 8 * group * kHalfQK, 128, kDimQK * 16);
    float o[1][Half::kOutTiles][4];
    float(&o_flat)[kHalfV / 2] = flat(o);
    zero(o);
    OnlineSoftmax<1> softmax;
    softmax.init();
    u32 p_frag[kBlockN / 16][1][4];

    // Block j: S_g(j) and O_g += P(j-1)·V[j-1] go to the tensor cores
    // together; the exchange and the softmax of S(j) run while the second
    // one does. Blocks 0 and n are peeled off, so no wgmma sits in a branch.
    if (n_blocks > 0) {
      wait_and_load(smem, k, v, p, 0, n_blocks, thread);
      float s[1][Half::kScoreTiles][4];
      wgmma_fence();
      half_scores(s, q_desc, smem.k[0], group);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(flat(s));
      add_other_half(smem, s, group, group_thread);
      float correction[1][2];
      Half::block_softmax(s, correction, softmax, p, 0, warp_row0, lane);
#pragma unroll
      for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(p_frag[ks], s, ks);
    }
    for (int n_block = 1; n_block < n_blocks; ++n_block) {
      wait_and_load(smem, k, v, p, n_block, n_blocks, thread);
      float s[1][Half::kScoreTiles][4];
      fence_registers(o_flat);
      wgmma_fence();
      half_scores(s, q_desc, smem.k[n_block % kStages], group);
      wgmma_commit();
      half_output(o_flat, p_frag, smem.v[(n_block - 1) % kStages], group);
      wgmma_commit();
      wgmma_wait<1>();  // S_g(j) is done; P(j-1)·V may still run
      fence_registers(flat(s));
      add_other_half(smem, s, group, group_thread);
      float correction[1][2];
      Half::block_softmax(s, correction, softmax, p, n_block * kBlockN, warp_row0, lane);
      wgmma_wait<0>();  // O holds blocks < j, and the P fragments are free
      fence_registers(o_flat);
      scale_rows(o, correction);
#pragma unroll
      for (int ks = 0; ks < kBlockN / 16; ++ks) pack_a_from_acc<E>(p_frag[ks], s, ks);
    }
    if (n_blocks > 0) {
      cp_async_wait<0>();
      fence_async_shared();
      __syncthreads();  // V[n-1] has landed for all
      fence_registers(o_flat);
      wgmma_fence();
      half_output(o_flat, p_frag, smem.v[(n_blocks - 1) % kStages], group);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o_flat);
    }

    // Each warpgroup writes its columns; the first also the LSE.
    typename Half::Work w;
    w.batch = batch;
    w.head = head;
    w.kv_head = kv_head;
    w.chunk = group;
    w.dv0 = group * kHalfV;
    w.row0 = row0;
    w.n_blocks = n_blocks;
    w.value_cols = C::kDimV - w.dv0;
    Half::store_outputs(p, w, o, softmax, warp_row0, lane);
  }

  // Issues S_g = Q_g·K_gᵀ over this warpgroup's half of the head dims.
  static __device__ __forceinline__ void half_scores(float (&s)[1][Half::kScoreTiles][4],
                                                     u64 q_desc, const u16* k_tile, int group) {
    const u64 k_desc = matrix_descriptor(k_tile + 8 * group * kHalfQK, 128, kDimQK * 16);
#pragma unroll
    for (int ks = 0; ks < kHalfQK / 16; ++ks)  // a k step: 2 core matrices (256 bytes) along K
      Wgmma<kBlockN>::template shared_shared<E>(flat(s), q_desc + ks * 16, k_desc + ks * 16,
                                                ks > 0);
  }

  // Issues O_g += P·V_g over this warpgroup's half of the value columns.
  static __device__ __forceinline__ void half_output(float (&o)[kHalfV / 2],
                                                     const u32 (&p_frag)[kBlockN / 16][1][4],
                                                     const u16* v_tile, int group) {
    const u64 v_desc = matrix_descriptor(v_tile + 8 * group * kHalfV, kDimV * 16, 128);
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks)  // 16 keys: 2 core matrices along K
      Wgmma<kHalfV>::template registers_shared<E>(o, p_frag[ks][0], v_desc + ks * 2 * kDimV, 1);
  }

  // S = S_g + S_other: writes this thread's partial fragment, waits for both
  // warpgroups, adds the other's.
  static __device__ __forceinline__ void add_other_half(SharedStorage& smem,
                                                        float (&s)[1][Half::kScoreTiles][4],
                                                        int group, int group_thread) {
    float(&mine)[kScoreFloats] = flat(s);
#pragma unroll
    for (int i = 0; i < kScoreFloats; ++i) smem.partial[group][i][group_thread] = mine[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kScoreFloats; ++i) mine[i] += smem.partial[1 - group][i][group_thread];
  }

  // Waits for copy group G(j-1) = {K[j], V[j-1]}, then issues G(j).
  static __device__ __forceinline__ void wait_and_load(SharedStorage& smem, const u16* k,
                                                       const u16* v, const AttentionParams& p,
                                                       int n_block, int n_blocks, int thread) {
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();
    load_ahead(smem, k, v, p, n_block + 1, n_blocks, thread);
  }

  // Issues and commits {K[ahead], V[ahead-1]} into the stages blocks
  // ahead - 2 and ahead - 3 were read from (blocks past the last are not
  // copied).
  static __device__ __forceinline__ void load_ahead(SharedStorage& smem, const u16* k,
                                                    const u16* v, const AttentionParams& p,
                                                    int ahead, int n_blocks, int thread) {
    if (ahead < n_blocks) {
      const int key0 = ahead * kBlockN;
      copy_core_matrix_tile<kBlockN, kDimQK, C::kVec, kThreads>(
          smem.k[ahead % kStages], k + key0 * p.k.stride_seq, p.k.stride_seq, p.seq_kv - key0,
          C::kDimQK, thread);
    }
    if (ahead >= 1 && ahead - 1 < n_blocks) {
      const int key0 = (ahead - 1) * kBlockN;
      copy_core_matrix_tile<kBlockN, kDimV, C::kVec, kThreads>(
          smem.v[(ahead - 1) % kStages], v + key0 * p.v.stride_seq, p.v.stride_seq,
          p.seq_kv - key0, C::kDimV, thread);
    }
    cp_async_commit();
  }
};

}  // namespace flashgen_device
