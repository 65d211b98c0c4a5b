// The C API: statuses, NULL arguments, the per-thread last error, and that
// it reaches the same planner as the C++ API.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "flashgen/flashgen.h"
#include "host_problem.hpp"

namespace flashgen::testing {
namespace {

fg_tensor c_tensor(const TensorView& t) {
  fg_tensor c;
  std::memset(&c, 0, sizeof(c));
  c.data = t.data;
  c.dtype = static_cast<int32_t>(t.dtype);
  c.memory = static_cast<int32_t>(t.memory);
  c.device = t.device;
  for (int i = 0; i < 4; ++i) {
    c.shape[i] = t.shape[i];
    c.stride[i] = t.stride[i];
  }
  return c;
}

fg_row_stats c_row_stats(const RowStatsView& t) {
  fg_row_stats c;
  std::memset(&c, 0, sizeof(c));
  c.data = t.data;
  c.memory = static_cast<int32_t>(t.memory);
  c.device = t.device;
  for (int i = 0; i < 3; ++i) {
    c.shape[i] = t.shape[i];
    c.stride[i] = t.stride[i];
  }
  return c;
}

// The C structs of one HostProblem.
struct CArgs {
  explicit CArgs(HostProblem& problem) {
    const BackwardArgs a = problem.backward_args();
    q = c_tensor(a.q);
    k = c_tensor(a.k);
    v = c_tensor(a.v);
    o = c_tensor(a.o);
    grad_o = c_tensor(a.grad_o);
    grad_q = c_tensor(a.grad_q);
    grad_k = c_tensor(a.grad_k);
    grad_v = c_tensor(a.grad_v);
    lse = c_row_stats(a.lse);
    fg_options_init(&options);
  }
  int forward() { return fg_forward(&q, &k, &v, &o, &lse, &options); }
  int backward() {
    return fg_backward(&q, &k, &v, &o, &grad_o, &lse, &grad_q, &grad_k, &grad_v, nullptr, 0,
                       &options);
  }
  fg_tensor q, k, v, o, grad_o, grad_q, grad_k, grad_v;
  fg_row_stats lse;
  fg_options options;
};

bool contains(const char* text, const std::string& fragment) {
  return std::string(text).find(fragment) != std::string::npos;
}

TEST(CApi, OptionsInitGivesTheCppDefaults) {
  fg_options options;
  std::memset(&options, 0xab, sizeof(options));
  fg_options_init(&options);
  const Options defaults;
  EXPECT_EQ(options.has_scale, 0);
  EXPECT_EQ(options.causal, 0);
  EXPECT_EQ(options.backend, FG_BACKEND_AUTO);
  EXPECT_EQ(options.deterministic, defaults.deterministic ? 1 : 0);
  EXPECT_EQ(options.stream, nullptr);
  EXPECT_EQ(options.cpu_threads, 0);
  EXPECT_EQ(options.reserved, 0);
  EXPECT_EQ(options.window_left, defaults.window_left);
  EXPECT_EQ(options.window_right, defaults.window_right);
  EXPECT_EQ(options.softcap, defaults.softcap);
  EXPECT_EQ(options.causal_alignment, FG_CAUSAL_BOTTOM_RIGHT);
  for (const fg_head_vector* v : {&options.alibi_slopes, &options.sinks, &options.grad_sinks}) {
    EXPECT_EQ(v->data, nullptr);
    EXPECT_EQ(v->rank, 1);
  }
  EXPECT_EQ(options.mask_mod, nullptr);
  EXPECT_EQ(options.mask_tensors, nullptr);
  EXPECT_EQ(options.mask_tensor_count, 0);
  fg_options_init(nullptr);  // must not crash
}

// A mask expression and its arrays cross the C API: the same outputs, bit
// for bit, as the C++ call; its refusals keep the library's words.
TEST(CApi, MaskModMatchesTheCppCall) {
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 f32
  problem.fill_inputs(3);
  const std::vector<std::int32_t> doc = {0, 0, 0, 1, 1, 2, 2};
  const std::vector<float> bias = {1.0f, -1.0f};
  const fg_mask_tensor tensors[] = {{"doc", doc.data(), FG_MASK_INT32, FG_HOST, 0, 1, 7, 1},
                                    {"bias", bias.data(), FG_MASK_FLOAT32, FG_HOST, 0, 1, 2, 1}};
  CArgs c(problem);
  c.options.backend = FG_BACKEND_CPU;
  c.options.mask_mod = "doc[kv_idx] == doc[q_idx] || bias[b] < 0.0";
  c.options.mask_tensors = tensors;
  c.options.mask_tensor_count = 2;
  ASSERT_EQ(c.forward(), FG_OK) << fg_last_error();
  ASSERT_EQ(c.backward(), FG_OK) << fg_last_error();
  const std::vector<unsigned char> o = problem.o, grad_k = problem.grad_k;

  Options options;
  options.backend = Backend::cpu;
  options.mask_mod = c.options.mask_mod;
  options.mask_tensors = {MaskTensorView::int32("doc", doc.data(), 7),
                          MaskTensorView::float32("bias", bias.data(), 2)};
  problem.poison_outputs(0x7f);
  forward(problem.forward_args(), options);
  backward(problem.backward_args(), options);
  EXPECT_EQ(problem.o, o);
  EXPECT_EQ(problem.grad_k, grad_k);

  c.options.mask_mod = "doc[kv_idx] == nope";
  EXPECT_EQ(c.forward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "mask_mod: unknown name \"nope\" at column 16")) << fg_last_error();
  c.options.mask_tensor_count = -1;
  EXPECT_EQ(c.forward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "options->mask_tensor_count (-1) must be >= 0"));
  c.options.mask_tensor_count = 1;
  c.options.mask_tensors = nullptr;
  EXPECT_EQ(c.forward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "options->mask_tensors must not be NULL"));
}

// Every mask and modifier crosses the C API: the same outputs, bit for bit,
// as the C++ call with the same options.
TEST(CApi, ScoreOptionsMatchTheCppCall) {
  HostProblem problem;  // B=2 Sq=5 Skv=7 Hq=4 Hkv=2 f32
  problem.fill_inputs(7);
  std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.5f, 0.5f, 0.5f, 0.5f};
  std::vector<float> sinks = {0.1f, -0.2f, 0.3f, 1.0f}, grad_sinks(4, 0.0f);
  CArgs c(problem);
  c.options.backend = FG_BACKEND_CPU;
  c.options.causal = 1;
  c.options.causal_alignment = FG_CAUSAL_TOP_LEFT;
  c.options.window_left = 2;
  c.options.window_right = 1;
  c.options.softcap = 1.5;
  c.options.alibi_slopes = {slopes.data(), FG_HOST, 0, 2, 0, {2, 4}, {4, 1}};
  c.options.sinks = {sinks.data(), FG_HOST, 0, 1, 0, {4, 0}, {1, 0}};
  c.options.grad_sinks = {grad_sinks.data(), FG_HOST, 0, 1, 0, {4, 0}, {1, 0}};
  ASSERT_EQ(c.forward(), FG_OK) << fg_last_error();
  ASSERT_EQ(c.backward(), FG_OK) << fg_last_error();
  const std::vector<unsigned char> o = problem.o, grad_q = problem.grad_q;
  const std::vector<float> lse = problem.lse, grad_sinks_c = grad_sinks;

  Options options;
  options.backend = Backend::cpu;
  options.causal = true;
  options.causal_alignment = CausalAlignment::top_left;
  options.window_left = 2;
  options.window_right = 1;
  options.softcap = 1.5;
  options.alibi_slopes = HeadVectorView::batch_heads(slopes.data(), 2, 4);
  options.sinks = HeadVectorView::heads(sinks.data(), 4);
  options.grad_sinks = HeadVectorView::heads(grad_sinks.data(), 4);
  problem.poison_outputs(0x7f);
  std::fill(grad_sinks.begin(), grad_sinks.end(), -1.0f);
  forward(problem.forward_args(), options);
  backward(problem.backward_args(), options);
  EXPECT_EQ(problem.o, o);
  EXPECT_EQ(problem.lse, lse);
  EXPECT_EQ(problem.grad_q, grad_q);
  EXPECT_EQ(grad_sinks, grad_sinks_c);
}

TEST(CApi, NullArgumentsAreNamed) {
  HostProblem problem;
  CArgs c(problem);
  EXPECT_EQ(fg_forward(nullptr, &c.k, &c.v, &c.o, &c.lse, &c.options), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "q must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_forward(&c.q, &c.k, &c.v, nullptr, &c.lse, &c.options), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "o must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_forward(&c.q, &c.k, &c.v, &c.o, &c.lse, nullptr), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "options must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_backward(&c.q, &c.k, &c.v, &c.o, &c.grad_o, nullptr, &c.grad_q, &c.grad_k,
                        &c.grad_v, nullptr, 0, &c.options),
            FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "lse must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_backward(&c.q, &c.k, &c.v, &c.o, &c.grad_o, &c.lse, &c.grad_q, &c.grad_k, nullptr,
                        nullptr, 0, &c.options),
            FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "grad_v must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_backward_workspace_bytes(&c.q, &c.k, &c.v, &c.o, &c.grad_o, &c.lse, &c.grad_q,
                                        &c.grad_k, &c.grad_v, &c.options, nullptr),
            FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "bytes must not be NULL")) << fg_last_error();
  EXPECT_EQ(fg_supports_forward(&c.q, nullptr, &c.v, &c.o, nullptr, &c.options),
            FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "k must not be NULL")) << fg_last_error();
}

TEST(CApi, RuleViolationsCarryTheCodeAndTheMessage) {
  HostProblem problem;
  CArgs c(problem);
  c.k.shape[2] = 3;
  c.v.shape[2] = 3;
  EXPECT_EQ(c.forward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "k.shape[2] (heads_kv = 3) must divide q.shape[2]"))
      << fg_last_error();

  CArgs bad_dtype(problem);
  bad_dtype.q.dtype = 42;
  EXPECT_EQ(fg_supports_forward(&bad_dtype.q, &bad_dtype.k, &bad_dtype.v, &bad_dtype.o,
                                &bad_dtype.lse, &bad_dtype.options),
            FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "q.dtype (42) is not a valid DType")) << fg_last_error();

  CArgs bad_options(problem);
  bad_options.options.backend = 9;
  EXPECT_EQ(bad_options.forward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "options.backend (9)")) << fg_last_error();

  CArgs bad_scale(problem);
  bad_scale.options.has_scale = 1;
  bad_scale.options.scale = std::numeric_limits<double>::infinity();
  EXPECT_EQ(bad_scale.backward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "options.scale (inf)")) << fg_last_error();

  CArgs bad_memory(problem);
  bad_memory.grad_q.memory = 5;
  EXPECT_EQ(bad_memory.backward(), FG_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fg_last_error(), "grad_q.memory (5)")) << fg_last_error();
}

TEST(CApi, ScaleIsIgnoredWithoutHasScale) {
  HostProblem problem;
  CArgs c(problem);
  c.options.scale = std::nan("");  // would be refused if used
  c.options.has_scale = 0;
  EXPECT_EQ(fg_supports_forward(&c.q, &c.k, &c.v, &c.o, &c.lse, &c.options), FG_OK)
      << fg_last_error();
}

TEST(CApi, SupportsForwardAcceptsANullLse) {
  HostProblem problem;
  CArgs c(problem);
  EXPECT_EQ(fg_supports_forward(&c.q, &c.k, &c.v, &c.o, nullptr, &c.options), FG_OK)
      << fg_last_error();
}

TEST(CApi, WorkspaceBytesOnTheCpuIsZero) {
  HostProblem problem;
  CArgs c(problem);
  size_t bytes = 12345;
  EXPECT_EQ(fg_backward_workspace_bytes(&c.q, &c.k, &c.v, &c.o, &c.grad_o, &c.lse, &c.grad_q,
                                        &c.grad_k, &c.grad_v, &c.options, &bytes),
            FG_OK)
      << fg_last_error();
  EXPECT_EQ(bytes, 0u);
}

TEST(CApi, OptionsTheCudaKernelsDoNotRunAreRefusedByName) {
  HostProblem problem;
  CArgs c(problem);
  for (fg_tensor* t : {&c.q, &c.k, &c.v, &c.o}) t->memory = FG_CUDA;
  c.lse.memory = FG_CUDA;
  const std::vector<std::int32_t> values(7, 0);
  const char* const names[] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"};
  std::vector<fg_mask_tensor> tensors;
  for (const char* name : names)
    tensors.push_back({name, values.data(), FG_MASK_INT32, FG_CUDA, 0, 1, 7, 1});
  c.options.mask_mod = "a8[kv_idx] == 0";
  c.options.mask_tensors = tensors.data();
  c.options.mask_tensor_count = static_cast<std::int64_t>(tensors.size());
  EXPECT_EQ(c.forward(), FG_UNSUPPORTED);
  EXPECT_TRUE(contains(fg_last_error(),
                       "mask_tensors with more than 8 arrays: not supported by the CUDA backend yet"))
      << fg_last_error();
}

TEST(CApi, DeviceMemoryWithoutAGpuIsUnsupported) {
  if (cuda::availability().ok) GTEST_SKIP() << "a GPU is available here";
  HostProblem problem;
  CArgs c(problem);
  for (fg_tensor* t : {&c.q, &c.k, &c.v, &c.o}) t->memory = FG_CUDA;
  c.lse.memory = FG_CUDA;
  EXPECT_EQ(c.forward(), FG_UNSUPPORTED);
  EXPECT_TRUE(contains(fg_last_error(), cuda::availability().reason)) << fg_last_error();
  EXPECT_EQ(fg_cuda_available(), 0);
  EXPECT_TRUE(contains(fg_last_error(), cuda::availability().reason)) << fg_last_error();
}

TEST(CApi, LastErrorIsPerThread) {
  HostProblem problem;
  CArgs c(problem);
  c.o.shape[3] = 1;
  ASSERT_EQ(c.forward(), FG_INVALID_ARGUMENT);
  const std::string here = fg_last_error();
  ASSERT_TRUE(contains(here.c_str(), "o.shape[3]")) << here;
  std::string other;
  std::thread thread([&] { other = fg_last_error(); });
  thread.join();
  EXPECT_EQ(other, "");  // a thread that never failed has no message
  EXPECT_EQ(here, fg_last_error());
}

TEST(CApi, EmptyProblemRunsThroughTheCApi) {
  ProblemShape shape;
  shape.seq_kv = 0;
  HostProblem problem(shape);
  problem.poison_outputs(0x7f);
  CArgs c(problem);
  ASSERT_EQ(c.forward(), FG_OK) << fg_last_error();
  for (float value : problem.lse) EXPECT_EQ(value, -std::numeric_limits<float>::infinity());
  for (unsigned char byte : problem.o) EXPECT_EQ(byte, 0);
}

TEST(CApi, VersionAndStatusValues) {
  EXPECT_STREQ(fg_version(), version());
  EXPECT_EQ(FG_OK, 0);
  EXPECT_EQ(FG_INVALID_ARGUMENT, static_cast<int>(ErrorCode::invalid_argument));
  EXPECT_EQ(FG_UNSUPPORTED, static_cast<int>(ErrorCode::unsupported));
  EXPECT_EQ(FG_RUNTIME, static_cast<int>(ErrorCode::runtime));
}

}  // namespace
}  // namespace flashgen::testing
