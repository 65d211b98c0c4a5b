// KernelSpec / TuningParams names, the tuning parser, the generator's checks
// and the defaults' fit, all without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "codegen/generate.hpp"
#include "codegen/heuristics.hpp"
#include "codegen/forward_schedule.hpp"

namespace flashgen {
namespace {

constexpr std::size_t kHopperSharedLimit = 232448;

KernelSpec spec_of(KernelKind kind, int dim_qk, int dim_v, int vec = 8) {
  KernelSpec s;
  s.kind = kind;
  s.dim_qk = dim_qk;
  s.dim_v = dim_v;
  s.vec = vec;
  return s;
}

TEST(KernelSpec, CanonicalNames) {
  KernelSpec s = spec_of(KernelKind::forward, 127, 64, 1);
  s.causal = true;
  EXPECT_EQ(s.to_string(), "forward bf16 dqk=127 dv=64 causal=1 vec=1 sm_90a");
  TuningParams t{128, 48, 0, 4, kCacheQ};
  EXPECT_EQ(t.to_string(), "rows=128 cols=48 head=0 warps=4 cache=Q");
  EXPECT_EQ(t.row_tiles(), 2);
}

TEST(TuningParams, ParseRoundTrips) {
  const TuningParams t{64, 32, 256, 8, kCacheQ | kCacheGradO};
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  EXPECT_EQ(parse_tuning("rows=32 cols=16 head=0 warps=2 cache=none"),
            (TuningParams{32, 16, 0, 2, 0}));
}

TEST(TuningParams, WgmmaIsNamedOnlyWhenChosen) {
  TuningParams t{192, 64, 0, 12, 0};
  EXPECT_EQ(t.to_string(), "rows=192 cols=64 head=0 warps=12 cache=none");
  t.wgmma = true;
  EXPECT_EQ(t.to_string(), "rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  EXPECT_FALSE(parse_tuning("rows=64 cols=64 head=0 warps=4 cache=none mma=sync").wgmma);
}

// generate() refuses the pair with a message containing `rule`.
void refused(const KernelSpec& spec, const TuningParams& tuning, const char* rule) {
  try {
    generate(spec, tuning);
    ADD_FAILURE() << "accepted " << spec.to_string() << " | " << tuning.to_string();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
  }
}

TEST(TuningParams, StagesAreNamedOnlyWhenSet) {
  TuningParams t{192, 64, 0, 12, 0, true};
  t.stages = 3;
  EXPECT_EQ(t.to_string(), "rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma stages=3");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
}

TEST(Generate, StagesOnlyForTheForward) {
  TuningParams t{192, 64, 0, 12, 0, true};
  const KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  const std::size_t two = shared_bytes(s, t);
  t.stages = 3;
  EXPECT_EQ(shared_bytes(s, t), two + 2u * 64 * (128 + 128));  // one more K and V tile
  EXPECT_NE(generate(s, t).source.find("kStages = 3;"), std::string::npos);
  t.stages = 5;
  refused(s, t, "stages must be 2, 3 or 4");
  t.stages = 3;
  refused(spec_of(KernelKind::forward, 127, 127, 1), t, "stages must be 2 on rows only 2-byte");
  refused(spec_of(KernelKind::backward_query, 128, 128), t, "forward of 16-bit tensors only");
}

// The mma.sync forward's ring: `stages` K and V tiles, or on staged rows
// (here 2-byte aligned) one of each and `stages` staging areas.
TEST(Generate, StagesOfTheMmaSyncForwardAreARing) {
  TuningParams t{16, 64, 0, 1, 0};
  const KernelSpec aligned = spec_of(KernelKind::forward, 128, 128);
  const std::size_t two_buffers = shared_bytes(aligned, t);
  t.stages = 3;
  EXPECT_EQ(shared_bytes(aligned, t), two_buffers + 2u * 2 * 64 * (128 + 8) * 2);
  EXPECT_NE(generate(aligned, t).source.find("kStages = 3;"), std::string::npos);
  const KernelSpec staged = spec_of(KernelKind::forward, 127, 127, 1);
  t.stages = 0;
  const std::size_t one_staging = shared_bytes(staged, t);
  t.stages = 3;
  const std::size_t staging = 2u * 64 * (128 / 8 + 1) * 8 * 2;  // K's and V's, 2 bytes each
  EXPECT_EQ(shared_bytes(staged, t), one_staging + 2 * staging);
  KernelSpec f32 = aligned;
  f32.dtype = DType::f32;
  refused(f32, TuningParams{32, 32, 0, 4, 0, false, 3}, "stages");
}

// split=keys: the mma.sync forward's warps share one 16-row tile and split
// each key block between them.
TEST(Generate, KeySplitIsTheMmaSyncForwardsOverOneRowTile) {
  TuningParams t{16, 64, 0, 4, 0};
  t.split = WarpgroupSplit::keys;
  t.stages = 2;
  EXPECT_EQ(t.to_string(), "rows=16 cols=64 head=0 warps=4 cache=none stages=2 split=keys");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  const KernelSpec s = spec_of(KernelKind::forward, 127, 127, 1);
  EXPECT_NE(generate(s, t).source.find("kKeySplit = true;"), std::string::npos);
  TuningParams rows = t;
  rows.block_rows = 64;
  refused(s, rows, "split=keys needs rows=16");
  TuningParams one = t;
  one.warps = 1;
  refused(s, one, "warps >= 2");
  TuningParams narrow = t;
  narrow.block_cols = 32;  // 8 keys a warp
  refused(s, narrow, "cols a multiple of 16 * warps");
  refused(spec_of(KernelKind::backward_query, 64, 64), t, "mma.sync forward only");
}

TEST(TuningParams, ProducerIsNamedOnlyWhenSet) {
  TuningParams t{192, 64, 0, 12, 0, true};
  t.producer = true;
  EXPECT_EQ(t.to_string(), "rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma producer=warp");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  EXPECT_FALSE(parse_tuning("rows=64 producer=none").producer);
}

TEST(Generate, ProducerWarpgroupOnTheWgmmaForward) {
  TuningParams t{192, 64, 0, 12, 0, true};
  t.producer = true;
  const KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  const GeneratedKernel g = generate(s, t);
  EXPECT_NE(g.source.find("kernels/forward/wgmma_producer.cuh"), std::string::npos);
  EXPECT_NE(g.source.find("kStages = 3;"), std::string::npos) << "three stages by default";
  EXPECT_EQ(g.threads, (12 + 4) * 32);
  // Three stages of K and V, and a full and an empty barrier per stage of
  // two pipelines (one used with cp.async copies).
  EXPECT_EQ(g.shared_bytes, 2u * (192 * 128 + 3 * 64 * (128 + 128)) + 2 * 2 * 3 * 8);
  t.stages = 2;
  refused(s, t, "stages >= 3");
  // TMA copies keep K and V in pipelines of their own: two stages will do.
  const GeneratedKernel g_tma = generate(s, with_tma_producer(t, 2));
  EXPECT_NE(g_tma.source.find("kStages = 2;"), std::string::npos);
  EXPECT_EQ(g_tma.shared_bytes, 2u * (192 * 128 + 2 * 64 * (128 + 128)) + 2 * 2 * 2 * 8);
  t.stages = 0;
  refused(spec_of(KernelKind::forward, 127, 127, 1), t, "alignment class 2, 4 or 8");
  TuningParams mma_sync{64, 64, 0, 4, 0};
  mma_sync.producer = true;
  refused(spec_of(KernelKind::backward_query, 128, 128), mma_sync, "wgmma kernels only");
  // The query backward's producer keeps V three stages deep too.
  TuningParams query{128, 64, 0, 8, 0, true};
  query.producer = true;
  const GeneratedKernel g_q = generate(spec_of(KernelKind::backward_query, 64, 64), query);
  EXPECT_NE(g_q.source.find("kernels/backward_query/wgmma_producer.cuh"), std::string::npos);
  EXPECT_EQ(g_q.threads, (8 + 4) * 32);
  EXPECT_EQ(g_q.shared_bytes, 2u * (128 * (64 + 64) + 3 * 64 * 64 + 3 * 64 * 64) + 4u * 2 * 128 +
                                  2 * 3 * 8);
  // The key/value backward's producer: three stages (its own), two barriers each.
  TuningParams kv{128, 32, 0, 8, 0, true};
  kv.producer = true;
  const GeneratedKernel g_kv = generate(spec_of(KernelKind::backward_key_value, 64, 64), kv);
  EXPECT_NE(g_kv.source.find("kernels/backward_key_value/wgmma_producer.cuh"), std::string::npos);
  EXPECT_EQ(g_kv.threads, (8 + 4) * 32);
  EXPECT_EQ(g_kv.shared_bytes, 2u * (128 * (64 + 64) + 3 * 32 * (64 + 64)) + 4u * 3 * 2 * 32 +
                                   2 * 3 * 8);
}

TEST(Generate, TmaCopiesTheForwardProducersTilesOnAlignedRows) {
  TuningParams t{192, 64, 0, 12, 0, true};
  t.producer = true;
  t.tma = true;
  EXPECT_EQ(t.to_string(),
            "rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma producer=warp copy=tma");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  EXPECT_FALSE(parse_tuning("rows=64 copy=async").tma);
  const KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  const GeneratedKernel g = generate(s, t);
  EXPECT_TRUE(g.tensor_maps);
  EXPECT_NE(g.source.find("__grid_constant__ fg::TraversedTensorMaps maps"), std::string::npos);
  EXPECT_NE(g.source.find("kTma = true;"), std::string::npos);
  // The same shared memory as the cp.async producer.
  TuningParams async = t;
  async.tma = false;
  EXPECT_EQ(g.shared_bytes, shared_bytes(s, async));
  EXPECT_FALSE(generate(s, async).tensor_maps);
  EXPECT_NE(generate(s, async).source.find("kTma = false;"), std::string::npos);
  // Other contiguous rows: the forward and the two-kernel backward read
  // their token-row views (wider tiles, the fixed stages' barriers); the
  // atomic backward refuses.
  const KernelSpec odd = spec_of(KernelKind::forward, 68, 68, 4);
  const GeneratedKernel token_rows = generate(odd, t);
  EXPECT_TRUE(token_rows.tensor_maps);
  EXPECT_GT(token_rows.shared_bytes, shared_bytes(spec_of(KernelKind::forward, 72, 72), t));
  refused(spec_of(KernelKind::forward, 68, 68, 0), t, "contiguous rows");
  TuningParams backward_tma{128, 64, 0, 8, 0, true};
  backward_tma.producer = true;
  backward_tma.tma = true;
  for (KernelKind kind : {KernelKind::backward_query, KernelKind::backward_key_value}) {
    const KernelSpec odd_backward = spec_of(kind, 68, 68, 4);
    EXPECT_TRUE(generate(odd_backward, backward_tma).tensor_maps) << to_string(kind);
    EXPECT_GT(generate(odd_backward, backward_tma).shared_bytes,
              shared_bytes(spec_of(kind, 72, 72), backward_tma))
        << to_string(kind);
  }
  TuningParams split = backward_tma;
  split.block_rows = 64;
  split.split = WarpgroupSplit::outputs;
  EXPECT_TRUE(generate(spec_of(KernelKind::backward_key_value, 199, 199, 1), split).tensor_maps);
  EXPECT_FALSE(tma_copies(spec_of(KernelKind::backward_atomic, 68, 68, 4)));
  TuningParams without_producer = t;
  without_producer.producer = false;
  refused(s, without_producer, "producer=warp only");
  // The backward producers copy their traversed tiles with TMA too.
  TuningParams backward{128, 32, 0, 8, 0, true};
  backward.producer = true;
  backward.tma = true;
  for (KernelKind kind : {KernelKind::backward_query, KernelKind::backward_key_value}) {
    const GeneratedKernel g_b = generate(spec_of(kind, 64, 64), backward);
    EXPECT_TRUE(g_b.tensor_maps) << g_b.name;
    EXPECT_NE(g_b.source.find("/wgmma_producer.cuh"), std::string::npos);
    EXPECT_NE(g_b.source.find("kTma = true;"), std::string::npos);
  }
}

TEST(Generate, TmaCopiesWholeSectorsIntoSwizzledTilesByDefault) {
  TuningParams t = with_tma_producer(TuningParams{128, 80, 0, 8, 0, true}, 2);
  EXPECT_EQ(t.swizzle, 32) << "whole-sector copies unless asked otherwise";
  EXPECT_EQ(t.to_string(),
            "rows=128 cols=80 head=0 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma "
            "swizzle=32");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  const KernelSpec s = spec_of(KernelKind::forward, 256, 256);
  const GeneratedKernel g = generate(s, t);
  EXPECT_EQ(g.swizzle, 32);
  EXPECT_NE(g.source.find("kSwizzle = 32;"), std::string::npos);
  EXPECT_NE(g.source.find("__align__(1024)"), std::string::npos);
  const TuningParams slices = with_tma_producer(TuningParams{128, 80, 0, 8, 0, true}, 2, 0);
  EXPECT_EQ(g.shared_bytes, shared_bytes(s, slices)) << "the same tiles, laid out otherwise";
  EXPECT_EQ(generate(s, slices).source.find("__align__(1024)"), std::string::npos);
  // The backward kernels' TMA producers take it too.
  TuningParams query = with_tma_producer(TuningParams{128, 32, 0, 8, 0, true});
  EXPECT_NE(
      generate(spec_of(KernelKind::backward_query, 128, 128), query).source.find("kSwizzle = 32;"),
      std::string::npos);
  EXPECT_EQ(without_producer(t).swizzle, 0) << "cp.async copies write the core-matrix layout";
  TuningParams cp_async{128, 80, 0, 8, 0, true};
  cp_async.swizzle = 32;
  EXPECT_THROW(generate(s, cp_async), Error) << "swizzled tiles come from TMA";
  t.swizzle = 64;
  EXPECT_THROW(generate(s, t), Error);
}

// schedule=persistent: named, parsed, generated with a second Q tile, and
// applied by with_persistent_tiles to every TMA forward on 16-byte rows
// whose value columns one CTA holds and whose shared memory has room.
TEST(Generate, PersistentForwardWhereItApplies) {
  const TuningParams grid = with_tma_producer(TuningParams{192, 64, 0, 12, 0, true}, 4);
  const KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  const TuningParams walked = with_persistent_tiles(s, grid, kHopperSharedLimit);
  EXPECT_TRUE(walked.persistent);
  EXPECT_EQ(walked.to_string(), grid.to_string() + " schedule=persistent");
  EXPECT_EQ(parse_tuning(walked.to_string()), walked);
  EXPECT_EQ(parse_tuning(grid.to_string() + " schedule=grid"), grid);
  EXPECT_THROW(parse_tuning("rows=64 schedule=tiles"), Error);
  const GeneratedKernel g = generate(s, walked);
  EXPECT_NE(g.source.find("kPersistent = true;"), std::string::npos);
  EXPECT_NE(generate(s, grid).source.find("kPersistent = false;"), std::string::npos);
  EXPECT_EQ(g.shared_bytes, shared_bytes(s, grid) + 2u * 192 * 128) << "the second Q tile";
  EXPECT_EQ(g.threads, generate(s, grid).threads);

  // Where it does not apply, the tuning comes back unchanged.
  const auto unchanged = [](const KernelSpec& spec, const TuningParams& t, std::size_t limit) {
    EXPECT_EQ(with_persistent_tiles(spec, t, limit), t)
        << spec.to_string() << " | " << t.to_string();
  };
  unchanged(s, without_producer(grid), kHopperSharedLimit);           // no producer
  unchanged(s, with_copying_producer(grid, 4), kHopperSharedLimit);   // cp.async copies
  unchanged(spec_of(KernelKind::forward, 128, 128, 4), grid, kHopperSharedLimit);  // token rows
  unchanged(s, grid, shared_bytes(s, grid));                          // no room for a second Q
  TuningParams chunked = grid;
  chunked.head_block = 64;
  unchanged(s, chunked, kHopperSharedLimit);                          // value chunks
  unchanged(spec_of(KernelKind::backward_query, 128, 128),
            with_tma_producer(TuningParams{128, 64, 0, 8, 0, true}), kHopperSharedLimit);

  // generate()'s rules say the same.
  TuningParams forced = walked;
  refused(spec_of(KernelKind::forward, 128, 128, 4), forced, "16-byte aligned rows");
  TuningParams copying = without_producer(grid);
  copying.persistent = true;
  refused(s, copying, "producer=warp and copy=tma");
  forced.head_block = 64;
  refused(s, forced, "all value columns in one CTA");
  EXPECT_FALSE(without_producer(walked).persistent);
  EXPECT_FALSE(with_copying_producer(walked).persistent);
}

// pingpong=1: named, parsed, generated, and refused where fewer than two
// computing warpgroups or no producer could take turns.
TEST(Generate, PingPongForwardWhereItApplies) {
  const KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  TuningParams turns = with_tma_producer(TuningParams{128, 128, 0, 8, 0, true}, 2, 32);
  turns.pingpong = true;
  EXPECT_NE(turns.to_string().find(" pingpong=1"), std::string::npos);
  EXPECT_EQ(parse_tuning(turns.to_string()), turns);
  EXPECT_THROW(parse_tuning("rows=64 pingpong=2"), Error);
  EXPECT_NE(generate(s, turns).source.find("kPingPong = true;"), std::string::npos);
  TuningParams free = turns;
  free.pingpong = false;
  EXPECT_NE(generate(s, free).source.find("kPingPong = false;"), std::string::npos);
  EXPECT_EQ(generate(s, turns).shared_bytes, generate(s, free).shared_bytes);
  TuningParams walking = turns;
  walking.persistent = true;
  EXPECT_NO_THROW(generate(s, walking));
  EXPECT_NO_THROW(generate(s, with_copying_producer(turns, 3)));
  EXPECT_FALSE(without_producer(turns).pingpong);

  TuningParams one_group = turns;
  one_group.warps = 4;
  one_group.block_rows = 64;
  refused(s, one_group, "two or more computing warpgroups");
  TuningParams no_producer = without_producer(turns);
  no_producer.pingpong = true;
  refused(s, no_producer, "producer=warp");
  // The backward kernels issue freely: turns are refused, and calls leave
  // theirs as the table says (with_gemm_turns: the forward only).
  const KernelSpec query = spec_of(KernelKind::backward_query, 128, 128);
  TuningParams query_turns = with_tma_producer(TuningParams{128, 64, 0, 8, 0, true});
  query_turns.pingpong = true;
  refused(query, query_turns, "applies to the wgmma forward with producer=warp");
  refused(spec_of(KernelKind::backward_key_value, 128, 128), query_turns, "the wgmma forward");
  refused(spec_of(KernelKind::backward_atomic, 128, 128), turns, "the wgmma forward");
  query_turns.pingpong = false;
  EXPECT_EQ(with_gemm_turns(query, query_turns), query_turns);

  // Calls take turns wherever they can (with_gemm_turns), walking or not.
  EXPECT_EQ(with_gemm_turns(s, free), turns);
  EXPECT_EQ(with_gemm_turns(s, one_group), one_group);
  EXPECT_EQ(with_gemm_turns(s, without_producer(free)), without_producer(free));
  Problem p;
  p.seq_q = p.seq_kv = 8192;
  EXPECT_EQ(scheduled_as_run(s, p, free, kHopperSharedLimit), turns);
  p.seq_q = p.seq_kv = 256;
  EXPECT_EQ(scheduled_as_run(s, p, free, kHopperSharedLimit), walking);
}

// A call walks where its query blocks traverse few keys: short sequences
// and narrow windows (kWalkMostKeys), not long or causal traversals.
TEST(Generate, WalksWhereQueryBlocksTraverseFewKeys) {
  const KernelSpec s = spec_of(KernelKind::forward, 64, 64);
  const TuningParams grid = with_tma_producer(TuningParams{192, 96, 0, 12, 0, true});
  Problem p;
  p.seq_q = p.seq_kv = 257;
  EXPECT_EQ(keys_per_query_block(p, 192), 257);
  EXPECT_TRUE(walking_where_faster(s, p, grid, kHopperSharedLimit).persistent);
  p.seq_q = p.seq_kv = 4096;
  p.causal = true;
  EXPECT_EQ(keys_per_query_block(p, 192), 4096);
  EXPECT_FALSE(walking_where_faster(s, p, grid, kHopperSharedLimit).persistent);
  p.window_left = 128;  // causal bounds the right edge
  EXPECT_EQ(keys_per_query_block(p, 192), 128 + 192);
  EXPECT_TRUE(walking_where_faster(s, p, grid, kHopperSharedLimit).persistent);
  p.causal = false;  // the right edge unbounded
  EXPECT_EQ(keys_per_query_block(p, 192), 4096);
  p.window_right = 17;
  EXPECT_EQ(keys_per_query_block(p, 192), 128 + 17 + 192);
  p.window_left = 4096;
  EXPECT_FALSE(walking_where_faster(s, p, grid, kHopperSharedLimit).persistent);
  // Where the walk cannot run, the tuning comes back as it was.
  p.window_left = 128;
  EXPECT_EQ(walking_where_faster(s, p, without_producer(grid), kHopperSharedLimit),
            without_producer(grid));
}

// Under a window of a few blocks the query kernel runs 64-row mma.sync
// blocks over 32 keys (query_blocks_for_window); not where the sequence
// bounds the traversal, a wide window, wide heads or other kernels.
TEST(Generate, QueryKernelTakesNarrowBlocksUnderANarrowWindow) {
  KernelSpec s = spec_of(KernelKind::backward_query, 64, 64);
  s.causal = s.window = true;
  const TuningParams table = with_tma_producer(TuningParams{192, 64, 0, 12, 0, true});
  Problem p;
  p.seq_q = p.seq_kv = 4096;
  p.causal = true;
  p.window_left = 128;
  const TuningParams narrow = query_blocks_for_window(s, p, table, kHopperSharedLimit);
  EXPECT_EQ(narrow.to_string(), "rows=64 cols=32 head=0 warps=4 cache=none");
  EXPECT_EQ(scheduled_as_run(s, p, table, kHopperSharedLimit), narrow);
  p.window_left = 4096;  // a wide window
  EXPECT_EQ(query_blocks_for_window(s, p, table, kHopperSharedLimit), table);
  p.window_left = -1;  // the sequence bounds it
  p.seq_q = p.seq_kv = 257;
  EXPECT_EQ(query_blocks_for_window(s, p, table, kHopperSharedLimit), table);
  p.seq_q = p.seq_kv = 4096;
  p.window_left = 128;
  EXPECT_EQ(query_blocks_for_window(spec_of(KernelKind::backward_key_value, 64, 64), p, table,
                                    kHopperSharedLimit),
            table);
  KernelSpec wide = s;
  wide.dim_qk = wide.dim_v = 256;
  EXPECT_EQ(query_blocks_for_window(wide, p, table, kHopperSharedLimit), table);
}

// The forward too: 64-row mma.sync blocks over 64 keys, Q in registers, to
// 64 columns.
TEST(Generate, ForwardTakesNarrowBlocksUnderANarrowWindow) {
  KernelSpec s = spec_of(KernelKind::forward, 64, 64);
  s.causal = s.window = s.sinks = true;
  const TuningParams table = with_tma_producer(TuningParams{192, 128, 0, 12, 0, true});
  Problem p;
  p.seq_q = p.seq_kv = 4096;
  p.causal = true;
  p.window_left = 128;
  EXPECT_EQ(scheduled_as_run(s, p, table, kHopperSharedLimit).to_string(),
            "rows=64 cols=64 head=0 warps=4 cache=Q");
  p.window_left = -1;
  EXPECT_NE(scheduled_as_run(s, p, table, kHopperSharedLimit).to_string(),
            "rows=64 cols=64 head=0 warps=4 cache=Q");
  p.window_left = 128;
  KernelSpec wider = s;
  wider.dim_qk = wider.dim_v = 128;
  EXPECT_TRUE(scheduled_as_run(wider, p, table, kHopperSharedLimit).wgmma);
  KernelSpec decode = s;
  decode.split_keys = true;
  EXPECT_EQ(query_blocks_for_window(decode, p, table, kHopperSharedLimit), table);
}

TEST(Generate, KeyValueBackwardSplitsItsOutputsAcrossTwoWarpgroups) {
  TuningParams t = with_tma_producer(TuningParams{64, 64, 0, 8, 0, true});
  t.split = WarpgroupSplit::outputs;
  EXPECT_EQ(t.to_string(),
            "rows=64 cols=64 head=0 warps=8 cache=none mma=wgmma producer=warp copy=tma "
            "split=outputs swizzle=32");
  EXPECT_EQ(parse_tuning(t.to_string()), t);
  const KernelSpec s = spec_of(KernelKind::backward_key_value, 256, 256);
  const GeneratedKernel g = generate(s, t);
  EXPECT_NE(g.source.find("kernels/backward_key_value/wgmma_split.cuh"), std::string::npos);
  EXPECT_EQ(g.threads, 384) << "two computing warpgroups and the producer's";
  // K, V [64][256]; two stages of Q, dO [64][256]; L2 and Dterm; the
  // hand-over of Pᵀ [2][32][128] fp32; two full and two empty barriers.
  EXPECT_EQ(g.shared_bytes,
            2u * (64 * 512 + 2 * 64 * 512) + 4 * (2 * 2 * 64 + 2 * 32 * 128) + 2 * 2 * 8);
  EXPECT_LE(g.shared_bytes, 232448u) << "sm_90a's opt-in limit";
  refused(spec_of(KernelKind::backward_key_value, 257, 257), t, "Dqk <= 256 and Dv <= 256");
  refused(spec_of(KernelKind::backward_key_value, 256, 256, 4), t, "past 256 columns");
  refused(spec_of(KernelKind::backward_key_value, 200, 200, 0), t, "contiguous rows");
  refused(spec_of(KernelKind::forward, 256, 256), t, "backward_key_value kernel only");
  TuningParams wide = t;
  wide.block_rows = 128;
  wide.warps = 16;
  refused(s, wide, "rows=64 warps=8 head=0");
  refused(s, without_producer(t), "producer=warp copy=tma");
}

// The query backward whose two warpgroups split the head dims (split=dims):
// 64 rows over two warpgroups, TMA copies, dims up to 512; K `stages` deep
// (three by default), V two.
TEST(Generate, SplitDimsQueryBackwardSharesSixtyFourRows) {
  TuningParams t = with_tma_producer(TuningParams{64, 32, 0, 8, 0, true}, 0);
  t.split = WarpgroupSplit::dims;
  const KernelSpec s = spec_of(KernelKind::backward_query, 384, 384);
  const GeneratedKernel g = generate(s, t);
  EXPECT_NE(g.source.find("kernels/backward_query/wgmma_split.cuh"), std::string::npos);
  EXPECT_NE(g.source.find("kKeyStages = 3"), std::string::npos);
  EXPECT_EQ(g.threads, 384) << "two computing warpgroups and the producer";
  // q, dO [64][384]; three stages of k, two of v [32][384]; lse, dterm; the
  // exchanges (16 + 4 words a thread, per warpgroup); 2 x (3 + 2) barriers.
  EXPECT_EQ(shared_bytes(s, t), 2u * (64 * 768 + 3 * 32 * 384 + 2 * 32 * 384) + 4u * 128 +
                                    2u * 128 * 4 * (16 + 4) + 8u * 2 * 5);
  t.stages = 2;
  EXPECT_LE(shared_bytes(s, t), kHopperSharedLimit);
  refused(spec_of(KernelKind::backward_query, 520, 520), t, "Dqk <= 512 and Dv <= 512");
  // Rows that are not 16-byte aligned: token-row tiles, 15 columns wider
  // (D = 385: 416), and the fixed stages' barriers (as deep as V's): two
  // stages of k and v, 2 x (2 + 2 + 2) barriers.
  const KernelSpec odd = spec_of(KernelKind::backward_query, 385, 385, 1);
  EXPECT_EQ(shared_bytes(odd, t), 2u * (64 * 832 + 2 * 32 * 416 + 2 * 32 * 416) + 4u * 128 +
                                      2u * 128 * 4 * (16 + 4) + 8u * 2 * 6);
  EXPECT_NE(generate(odd, t).source.find("kVec = 1"), std::string::npos);
  refused(spec_of(KernelKind::backward_query, 510, 510, 2), t, "past 512 columns");
  refused(spec_of(KernelKind::backward_query, 300, 300, 0), t, "contiguous rows");
  TuningParams copying = t;
  copying.tma = false;
  copying.swizzle = 0;
  refused(s, copying, "producer=warp copy=tma");
  TuningParams five = t;
  five.stages = 5;
  refused(s, five, "stages=2, 3 or 4");
}

// The key/value backward with split=dims: a dV and a dK CTA per block of 64
// keys (two head chunks), each of two warpgroups splitting the head dims;
// Q and dO two stages deep by default.
TEST(Generate, SplitDimsKeyValueBackwardTakesTwoCtasPerKeyBlock) {
  TuningParams t = with_tma_producer(TuningParams{64, 32, 0, 8, 0, true}, 0);
  t.split = WarpgroupSplit::dims;
  const KernelSpec s = spec_of(KernelKind::backward_key_value, 384, 384);
  const GeneratedKernel g = generate(s, t);
  EXPECT_NE(g.source.find("kernels/backward_key_value/wgmma_dims.cuh"), std::string::npos);
  EXPECT_NE(g.source.find("kStages = 2"), std::string::npos);
  EXPECT_NE(g.source.find("kHeadChunks = 2"), std::string::npos);
  EXPECT_EQ(head_chunks_of(s, t), 2);
  // k, v [64][384]; two stages of q, dO [32][384]; lse, dterm [2][32]; the
  // exchanges (16 + 4 words a thread, per warpgroup); 2 x 2 barriers.
  EXPECT_EQ(shared_bytes(s, t),
            2u * (64 + 2 * 32) * 768 + 4u * 2 * 2 * 32 + 2u * 128 * 4 * (16 + 4) + 8u * 2 * 2);
  EXPECT_LE(shared_bytes(s, t), kHopperSharedLimit);
  refused(spec_of(KernelKind::backward_key_value, 520, 520), t, "Dqk <= 512 and Dv <= 512");
  // Token rows: tiles of 416 columns at D = 385, the fixed stages' barriers.
  EXPECT_EQ(shared_bytes(spec_of(KernelKind::backward_key_value, 385, 385, 1), t),
            2u * (64 + 2 * 32) * 832 + 4u * 2 * 2 * 32 + 2u * 128 * 4 * (16 + 4) + 8u * 2 * 2 * 2);
  refused(spec_of(KernelKind::backward_key_value, 300, 300, 0), t, "contiguous rows");
  // V held in registers (the dK CTA): V's tile leaves shared memory, a
  // 1024-byte placeholder keeps the tiles after it aligned.
  TuningParams held = t;
  held.cached = kCacheK | kCacheV;
  EXPECT_EQ(shared_bytes(s, t) - shared_bytes(s, held), 2u * (64 * 384 - 512));
  const GeneratedKernel g_held = generate(s, held);
  EXPECT_NE(g_held.source.find("kCacheK = true"), std::string::npos);
  EXPECT_NE(g_held.source.find("kCacheV = true"), std::string::npos);
  TuningParams query_held = held;
  query_held.cached = kCacheQ;
  refused(s, query_held, "cache=K, cache=V, cache=K,V or cache=none");
  refused(spec_of(KernelKind::backward_query, 384, 384), held,
          "cache=Q, cache=dO, cache=Q,dO or cache=none");
}

// The query kernel with split=dims holding Q and dO in registers: their
// tiles leave shared memory (1024-byte placeholders).
TEST(Generate, SplitDimsQueryBackwardHoldsQueryAndGradOutput) {
  TuningParams t = with_tma_producer(TuningParams{64, 32, 0, 8, 0, true}, 0);
  t.split = WarpgroupSplit::dims;
  const KernelSpec s = spec_of(KernelKind::backward_query, 384, 384);
  TuningParams held = t;
  held.cached = kCacheQ | kCacheGradO;
  EXPECT_EQ(shared_bytes(s, t) - shared_bytes(s, held), 2u * 2 * (64 * 384 - 512));
  const GeneratedKernel g = generate(s, held);
  EXPECT_NE(g.source.find("kCacheQ = true"), std::string::npos);
  EXPECT_NE(g.source.find("kCacheGradO = true"), std::string::npos);
}

TEST(Generate, WgmmaNeedsAlignedRowsHopperAndWholeWarpgroups) {
  TuningParams t{128, 64, 0, 8, 0};
  t.wgmma = true;
  KernelSpec s = spec_of(KernelKind::forward, 128, 128);
  EXPECT_NE(generate(s, t).source.find("kernels/forward/wgmma.cuh"), std::string::npos);
  EXPECT_EQ(shared_bytes(s, t), 2u * (128 * 128 + 2 * 64 * (128 + 128)));
  refused(spec_of(KernelKind::forward, 127, 127, 0), t, "contiguous rows");
  refused(spec_of(KernelKind::backward_key_value, 63, 63, 0), t, "contiguous rows");
  // The query backward stages 2-byte rows as the forward does.
  const KernelSpec odd_query = spec_of(KernelKind::backward_query, 127, 127, 1);
  EXPECT_EQ(shared_bytes(odd_query, t), 2u * (128 * (128 + 128) + 3 * 64 * 128 + 2 * 64 * 128 +
                                              2 * 64 * 17 * 8) +
                                            4u * 2 * 128);
  EXPECT_NE(generate(odd_query, t).source.find("kernels/backward_query/wgmma.cuh"), std::string::npos);
  const KernelSpec odd = spec_of(KernelKind::forward, 127, 127, 1);  // staged K and V
  EXPECT_EQ(shared_bytes(odd, t), 2u * (128 * 128 + 2 * 64 * 256 + 2 * 64 * 17 * 8));
  EXPECT_NO_THROW(generate(spec_of(KernelKind::forward, 68, 68, 4), t));
  EXPECT_NO_THROW(generate(spec_of(KernelKind::forward, 66, 66, 2), t));
  KernelSpec ampere = s;
  ampere.arch = "sm_80";
  refused(ampere, t, "sm_90a");
  refused(spec_of(KernelKind::backward_atomic, 128, 128), t, "forward, backward_query or backward_key_value kernel");
  refused(spec_of(KernelKind::backward_query, 384, 64), t, "Dqk <= 256");
  refused(spec_of(KernelKind::backward_key_value, 128, 136), t, "Dqk + Dv <= 256");
  EXPECT_NE(generate(spec_of(KernelKind::backward_key_value, 128, 128), t).source.find(
                "kernels/backward_key_value/wgmma.cuh"),
            std::string::npos);
  refused(spec_of(KernelKind::forward, 128, 384), t, "at most 288 value columns per CTA");
  TuningParams chunked{128, 32, 256, 8, 0};
  chunked.wgmma = true;
  const KernelSpec large = spec_of(KernelKind::forward, 512, 512);
  EXPECT_EQ(head_chunks_of(large, chunked), 2);
  EXPECT_EQ(shared_bytes(large, chunked), 2u * (128 * 512 + 2 * 32 * (512 + 256)));
  refused(spec_of(KernelKind::backward_query, 128, 128), TuningParams{128, 32, 64, 8, 0, true},
          "head must be 0");
  EXPECT_NE(generate(spec_of(KernelKind::backward_query, 128, 128), t).source.find("kernels/backward_query/wgmma.cuh"), std::string::npos);
  TuningParams six_warps{96, 64, 0, 6, 0};
  six_warps.wgmma = true;
  refused(s, six_warps, "warpgroups");
}

TEST(DefaultTuning, WgmmaForwardWhereItApplies) {
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::forward, 64, 64), kHopperSharedLimit).wgmma);
  // With the TMA producer down to the smallest aligned heads.
  const TuningParams d16 = default_tuning(spec_of(KernelKind::forward, 16, 16), kHopperSharedLimit);
  EXPECT_TRUE(d16.wgmma);
  EXPECT_TRUE(d16.tma);
  // 80-key blocks two stages deep at 256 columns.
  const TuningParams d256 =
      default_tuning(spec_of(KernelKind::forward, 256, 256), kHopperSharedLimit);
  EXPECT_EQ(d256.block_cols, 80);
  EXPECT_EQ(d256.stages, 2);
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::forward, 4, 4, 4), kHopperSharedLimit).wgmma);
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::forward, 256, 256), kHopperSharedLimit).wgmma);
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::forward, 127, 127, 1), kHopperSharedLimit).wgmma);
  // Token rows whose widened value tile passes 256 columns, up to 288: one
  // CTA over 64-key blocks (O in two products); past that, chunks of 256
  // whose widened tiles pass 256 go without TMA, as before.
  for (int dim : {249, 257, 271}) {
    const TuningParams wide =
        default_tuning(spec_of(KernelKind::forward, dim, dim, 1), kHopperSharedLimit);
    EXPECT_TRUE(wide.tma) << dim;
    EXPECT_EQ(wide.head_block, 0) << dim;
    EXPECT_EQ(wide.block_cols, 64) << dim;
    EXPECT_LE(shared_bytes(spec_of(KernelKind::forward, dim, dim, 1), wide), kHopperSharedLimit);
  }
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::forward, 505, 505, 1), kHopperSharedLimit).tma);
  // Past 256 value columns: chunks of 256, three warpgroups where they fit.
  const TuningParams d384 = default_tuning(spec_of(KernelKind::forward, 384, 384), kHopperSharedLimit);
  EXPECT_TRUE(d384.wgmma);
  EXPECT_EQ(d384.split, WarpgroupSplit::rows);
  EXPECT_EQ(d384.head_block, 256);
  EXPECT_EQ(d384.warps, 12);
  const TuningParams d512 = default_tuning(spec_of(KernelKind::forward, 512, 512), kHopperSharedLimit);
  EXPECT_TRUE(d512.wgmma);
  EXPECT_EQ(d512.warps, 8) << "three warpgroups of 512 columns do not fit";
  KernelSpec ampere = spec_of(KernelKind::forward, 64, 64);
  ampere.arch = "sm_80";
  EXPECT_FALSE(default_tuning(ampere, 166912).wgmma);
}

// Where TMA cannot read the traversed tensors (a zero stride), a TMA
// tuning runs without its producer, and the warpgroup splits (TMA only) give
// way to defaults that copy otherwise; every result generates for the
// 16-byte aligned spec it serves.
TEST(DefaultTuning, WithoutTmaEveryKernelStillGenerates) {
  for (KernelKind kind : {KernelKind::forward, KernelKind::backward_query,
                          KernelKind::backward_key_value, KernelKind::backward_atomic})
    for (int dim : {64, 128, 192, 256, 384, 512}) {
      const KernelSpec s = spec_of(kind, dim, dim);
      const TuningParams t =
          tuning_without_tma(s, default_tuning(s, kHopperSharedLimit), kHopperSharedLimit);
      EXPECT_FALSE(t.tma) << s.to_string() << " | " << t.to_string();
      EXPECT_NO_THROW(generate(s, t)) << s.to_string() << " | " << t.to_string();
      EXPECT_LE(shared_bytes(s, t), kHopperSharedLimit) << s.to_string() << " | " << t.to_string();
    }
  const KernelSpec query = spec_of(KernelKind::backward_query, 128, 128);
  const TuningParams rows = default_tuning(query, kHopperSharedLimit);
  ASSERT_TRUE(rows.tma);
  EXPECT_EQ(tuning_without_tma(query, rows, kHopperSharedLimit), without_producer(rows))
      << "the same shape without the producer";
}

TEST(DefaultTuning, WgmmaBackwardWhereItApplies) {
  EXPECT_EQ(default_tuning(spec_of(KernelKind::backward_query, 64, 64), kHopperSharedLimit).warps, 12);
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::backward_query, 128, 128), kHopperSharedLimit).wgmma);
  // The query kernel up to 256 columns.
  EXPECT_TRUE(
      default_tuning(spec_of(KernelKind::backward_query, 192, 192), kHopperSharedLimit).wgmma);
  EXPECT_TRUE(
      default_tuning(spec_of(KernelKind::backward_query, 256, 256), kHopperSharedLimit).wgmma);
  // Past 256 columns on 16-byte rows: two warpgroups splitting the head dims,
  // Q held in registers, over 32-key blocks three stages deep to 448 columns,
  // 16-key blocks past that.
  for (int dim : {264, 288, 352, 384, 448}) {
    const TuningParams d =
        default_tuning(spec_of(KernelKind::backward_query, dim, dim), kHopperSharedLimit);
    EXPECT_EQ(d.split, WarpgroupSplit::dims) << dim;
    EXPECT_EQ(d.cached, unsigned(kCacheQ)) << dim;
    EXPECT_EQ(d.block_cols, 32) << dim;
    EXPECT_EQ(d.stages, 3) << dim;
  }
  // On rows that are not 16-byte aligned too, through token-row views; where
  // TMA cannot read them, chunks of dQ on the mma.sync kernel.
  const KernelSpec odd_wide = spec_of(KernelKind::backward_query, 400, 400, 4);
  const TuningParams odd_wide_split = default_tuning(odd_wide, kHopperSharedLimit);
  EXPECT_EQ(odd_wide_split.split, WarpgroupSplit::dims);
  EXPECT_EQ(odd_wide_split.cached, unsigned(kCacheQ));
  const TuningParams odd_wide_chunks =
      tuning_without_tma(odd_wide, odd_wide_split, kHopperSharedLimit);
  EXPECT_FALSE(odd_wide_chunks.wgmma);
  EXPECT_EQ(odd_wide_chunks.head_block, 256);
  const TuningParams d512 =
      default_tuning(spec_of(KernelKind::backward_query, 512, 512), kHopperSharedLimit);
  EXPECT_EQ(d512.block_cols, 16);
  EXPECT_EQ(d512.stages, 3);
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::backward_query, 512, 512), 100000).wgmma)
      << "the mma.sync kernel where not even 16-key blocks fit";
  // Staged 2-byte rows: measured past 64 columns only.
  const TuningParams odd_query =
      default_tuning(spec_of(KernelKind::backward_query, 127, 127, 1), kHopperSharedLimit);
  EXPECT_TRUE(odd_query.wgmma);
  EXPECT_EQ(odd_query.block_cols, 48);
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::backward_query, 63, 63, 1), kHopperSharedLimit).wgmma);
  // The key/value kernel from 33 to 128 columns, any contiguous rows.
  EXPECT_FALSE(
      default_tuning(spec_of(KernelKind::backward_key_value, 32, 32), kHopperSharedLimit).wgmma);
  EXPECT_EQ(default_tuning(spec_of(KernelKind::backward_key_value, 64, 64), kHopperSharedLimit)
                .block_cols,
            96);
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::backward_key_value, 96, 96), kHopperSharedLimit).wgmma);
  EXPECT_TRUE(
      default_tuning(spec_of(KernelKind::backward_key_value, 127, 127, 1), kHopperSharedLimit).wgmma);
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::backward_key_value, 144, 144), kHopperSharedLimit).wgmma);
  // From 161 to 256 columns on 16-byte rows: two warpgroups splitting dK and dV.
  for (int d : {176, 256}) {
    const TuningParams split =
        default_tuning(spec_of(KernelKind::backward_key_value, d, d), kHopperSharedLimit);
    EXPECT_EQ(split.split, WarpgroupSplit::outputs) << d;
    EXPECT_TRUE(split.tma) << d;
  }
  // On rows that are not 16-byte aligned too, through token-row views
  // where TMA may read them; else the mma.sync kernel.
  const KernelSpec odd = spec_of(KernelKind::backward_key_value, 199, 199, 1);
  const TuningParams odd_split = default_tuning(odd, kHopperSharedLimit);
  EXPECT_EQ(odd_split.split, WarpgroupSplit::outputs);
  EXPECT_TRUE(odd_split.tma);
  EXPECT_FALSE(tuning_without_tma(odd, odd_split, kHopperSharedLimit).wgmma);
  // Past 256 columns on 16-byte rows: a dV and a dK CTA whose warpgroups
  // split the head dims, K and V in registers, 32-query blocks (16 past 448
  // columns) three stages deep where they fit, else two.
  const TuningParams kv384 =
      default_tuning(spec_of(KernelKind::backward_key_value, 384, 384), kHopperSharedLimit);
  EXPECT_EQ(kv384.split, WarpgroupSplit::dims);
  EXPECT_EQ(kv384.cached, unsigned(kCacheK | kCacheV));
  EXPECT_EQ(kv384.block_cols, 32);
  EXPECT_EQ(kv384.stages, 3);
  const TuningParams kv448 =
      default_tuning(spec_of(KernelKind::backward_key_value, 448, 448), kHopperSharedLimit);
  EXPECT_EQ(kv448.block_cols, 32);
  EXPECT_EQ(kv448.stages, 2);
  const TuningParams kv512 =
      default_tuning(spec_of(KernelKind::backward_key_value, 512, 512), kHopperSharedLimit);
  EXPECT_EQ(kv512.split, WarpgroupSplit::dims);
  EXPECT_EQ(kv512.block_cols, 16);
  EXPECT_EQ(kv512.stages, 3);
  // Token rows too (one query head per key/value head), else the mma.sync kernel.
  const KernelSpec kv_odd = spec_of(KernelKind::backward_key_value, 385, 385, 1);
  const TuningParams kv_odd_split = default_tuning(kv_odd, kHopperSharedLimit);
  EXPECT_EQ(kv_odd_split.split, WarpgroupSplit::dims);
  EXPECT_EQ(kv_odd_split.cached, unsigned(kCacheK | kCacheV));
  EXPECT_FALSE(tuning_without_tma(kv_odd, kv_odd_split, kHopperSharedLimit).wgmma);
}

TEST(DefaultTuning, TokenRowsOrACopyingProducerOnRowsNotSixteenByteAligned) {
  // Rows TMA reads through token-row views: the TMA producer at any alignment.
  for (int vec : {4, 2, 1}) {
    const TuningParams t =
        default_tuning(spec_of(KernelKind::forward, 127, 127, vec), kHopperSharedLimit);
    EXPECT_TRUE(t.producer && t.tma) << t.to_string();
  }
  EXPECT_TRUE(default_tuning(spec_of(KernelKind::forward, 96, 96), kHopperSharedLimit).tma);
  // Where TMA cannot read them (tuning_without_tma), D = 68-96 on 8-byte
  // rows: the producer's four warps copy, four stages deep.
  const KernelSpec s76 = spec_of(KernelKind::forward, 76, 76, 4);
  const TuningParams d76 =
      tuning_without_tma(s76, default_tuning(s76, kHopperSharedLimit), kHopperSharedLimit);
  EXPECT_TRUE(d76.producer);
  EXPECT_FALSE(d76.tma);
  EXPECT_EQ(d76.stages, 4);
  const KernelSpec s127 = spec_of(KernelKind::forward, 127, 127, 1);
  const TuningParams d127 =
      tuning_without_tma(s127, default_tuning(s127, kHopperSharedLimit), kHopperSharedLimit);
  EXPECT_FALSE(d127.producer);
  EXPECT_EQ(wgmma_forward_stages(d127), 2);  // one staging area
  // A value chunk the shift would widen past 256 columns (D = 497-512), or
  // heads of 64 columns or fewer (not measured): no TMA.
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::forward, 511, 511, 1), kHopperSharedLimit).tma);
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::forward, 63, 63, 1), kHopperSharedLimit).tma);
  EXPECT_FALSE(default_tuning(spec_of(KernelKind::forward, 60, 60, 4), kHopperSharedLimit).tma);
}

TEST(TuningParams, ParseRejectsWhatItDoesNotKnow) {
  for (const char* bad : {"rows", "rows=x", "depth=3", "cache=Z", "mma=tcgen05"}) {
    try {
      parse_tuning(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("tuning"), std::string::npos) << e.what();
    }
  }
}

TEST(Generate, RejectsTuningsTheTemplatesCannotRun) {
  const KernelSpec s = spec_of(KernelKind::forward, 64, 64);
  for (const TuningParams& bad : {TuningParams{48, 64, 0, 4, 0}, TuningParams{64, 40, 0, 4, 0},
                                  TuningParams{64, 64, 24, 4, 0}, TuningParams{64, 64, 0, 0, 0}}) {
    EXPECT_THROW(generate(s, bad), Error) << bad.to_string();
  }
}

TEST(Generate, SourceIsConstantsAndOneEntry) {
  const KernelSpec s = spec_of(KernelKind::backward_key_value, 199, 77, 1);
  const GeneratedKernel g = generate(s, {64, 32, 0, 4, 0});
  EXPECT_NE(g.source.find("#include \"kernels/backward_key_value/mma_sync.cuh\""), std::string::npos);
  EXPECT_NE(g.source.find("static constexpr int kDimQK = 199;"), std::string::npos);
  EXPECT_NE(g.source.find("static_assert(sizeof(Kernel::SharedStorage) == " +
                          std::to_string(g.shared_bytes)),
            std::string::npos);
  EXPECT_NE(g.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_EQ(g.entry, "flashgen_backward_key_value");
  EXPECT_EQ(g.threads, 128);
  EXPECT_EQ(g.name, s.to_string() + " | rows=64 cols=32 head=0 warps=4 cache=none");
}

TEST(Generate, HeadChunksSplitTheOutputColumns) {
  // Forward splits Dv; the query backward splits Dqk; key/value both.
  EXPECT_EQ(head_chunks_of(spec_of(KernelKind::forward, 64, 512), {64, 32, 256, 4, 0}), 2);
  EXPECT_EQ(head_chunks_of(spec_of(KernelKind::backward_query, 512, 64), {64, 32, 256, 4, 0}), 2);
  EXPECT_EQ(head_chunks_of(spec_of(KernelKind::backward_key_value, 385, 385), {64, 32, 128, 4, 0}),
            4);
  EXPECT_EQ(head_chunks_of(spec_of(KernelKind::forward, 64, 64), {64, 32, 256, 4, 0}), 1);
  EXPECT_EQ(chunk_width(385, 4), 112);  // 400 columns in 4 chunks of 7 MMA tiles
}

TEST(Generate, StagedCopiesCostSharedMemory) {
  const TuningParams t{64, 64, 0, 4, 0};
  const std::size_t aligned = shared_bytes(spec_of(KernelKind::forward, 128, 128, 8), t);
  const std::size_t staged = shared_bytes(spec_of(KernelKind::forward, 127, 127, 1), t);
  EXPECT_GT(staged, aligned);
  EXPECT_EQ(shared_bytes(spec_of(KernelKind::forward, 127, 127, 0), t), aligned);  // gathers
}

// Every default fits the device and is accepted by the generator.
TEST(DefaultTuning, FitsEveryKindAndDimension) {
  for (KernelKind kind : {KernelKind::forward, KernelKind::backward_query,
                          KernelKind::backward_key_value, KernelKind::backward_atomic})
    for (int dim : {1, 3, 8, 40, 64, 72, 127, 128, 199, 256, 257, 385, 512, 576})
      for (int vec : {8, 1})
        for (std::size_t limit : {std::size_t{166912}, kHopperSharedLimit}) {
          const KernelSpec s = spec_of(kind, dim, dim == 576 ? 512 : dim, vec);
          const TuningParams t = default_tuning(s, limit);
          EXPECT_NO_THROW(generate(s, t)) << s.to_string() << " | " << t.to_string();
          EXPECT_LE(shared_bytes(s, t), limit) << s.to_string() << " | " << t.to_string();
        }
}

TEST(DefaultTuning, PrefersTwoResidentCtasOfFourWarps) {
  KernelSpec s = spec_of(KernelKind::forward, 199, 199, 1);
  s.arch = "sm_80";  // the mma.sync forward (sm_90a takes the wgmma one)
  const TuningParams t = default_tuning(s, kHopperSharedLimit);
  EXPECT_EQ(t.warps, 4);
  EXPECT_LE(shared_bytes(s, t), kHopperSharedLimit / 2) << t.to_string();
}

TEST(DefaultTuning, TwoKernelBackwardWhereverMeasured) {
  for (int dim : {64, 128, 256, 257, 384, 385, 512}) EXPECT_FALSE(prefer_atomic_backward(dim, dim));
  EXPECT_FALSE(prefer_atomic_backward(257, 64));
}

// fp32: the CUDA-core kernels of the forward and the deterministic backward.
KernelSpec f32_spec(KernelKind kind, int dim_qk, int dim_v) {
  KernelSpec s = spec_of(kind, dim_qk, dim_v);
  s.dtype = DType::f32;
  return s;
}

TEST(Float32Kernels, DefaultsFitAndKeepTheirAccumulatorsInRegisters) {
  for (KernelKind kind :
       {KernelKind::forward, KernelKind::backward_query, KernelKind::backward_key_value})
    for (int dim : {1, 40, 127, 128, 129, 257, 512}) {
      const KernelSpec s = f32_spec(kind, dim, dim);
      const TuningParams t = default_tuning(s, kHopperSharedLimit);
      EXPECT_NO_THROW(check_tuning(s, t)) << s.to_string() << " " << t.to_string();
      EXPECT_LE(shared_bytes(s, t), kHopperSharedLimit) << s.to_string();
      EXPECT_EQ(t.block_rows, 8 * t.warps);
      EXPECT_EQ(t.block_cols, 32);
      const GeneratedKernel g = generate(s, t);
      EXPECT_NE(g.source.find("fg::kF32"), std::string::npos);
      EXPECT_NE(g.source.find("F32<Config>"), std::string::npos) << g.source;
    }
  // Wide heads: chunks of the output columns, and fewer warps where the
  // full-width tiles need the shared memory.
  EXPECT_EQ(default_tuning(f32_spec(KernelKind::forward, 512, 512), kHopperSharedLimit).head_block,
            128);
  EXPECT_LT(
      default_tuning(f32_spec(KernelKind::backward_query, 512, 512), kHopperSharedLimit).warps, 4);
}

TEST(Float32Kernels, TuningRulesNameTheField) {
  auto rule_of = [](const TuningParams& t, const KernelSpec& s = f32_spec(KernelKind::forward, 64,
                                                                            64)) {
    try {
      check_tuning(s, t);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(rule_of({32, 32, 0, 4, 0}), "");
  EXPECT_NE(rule_of({64, 32, 0, 4, 0}).find("rows = 8 * warps"), std::string::npos);
  EXPECT_NE(rule_of({32, 64, 0, 4, 0}).find("cols = 32"), std::string::npos);
  EXPECT_NE(rule_of({32, 32, 48, 4, 0}).find("head"), std::string::npos);
  TuningParams wgmma{32, 32, 0, 4, 0};
  wgmma.wgmma = true;
  EXPECT_NE(rule_of(wgmma).find("mma"), std::string::npos);
  // Accumulators past 256 columns per CTA.
  EXPECT_NE(rule_of({32, 32, 0, 4, 0}, f32_spec(KernelKind::forward, 64, 512)).find("256 output"),
            std::string::npos);
  // No atomic kernel for fp32.
  EXPECT_THROW(generate(f32_spec(KernelKind::backward_atomic, 64, 64), {32, 32, 0, 4, 0}), Error);
}

}  // namespace
}  // namespace flashgen
