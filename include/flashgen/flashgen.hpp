// flashgen — exact attention (FlashAttention) for any head dimension.
//
// O = softmax(scale · Q·Kᵀ) · V, forward and backward, on the CPU or on a CUDA
// GPU with kernels generated for the problem and compiled at run time.
//
// Tensors are strided views; nothing is ever copied into a padded buffer.
//   q  [batch, seq_q,  heads_q,  dim_qk]
//   k  [batch, seq_kv, heads_kv, dim_qk]
//   v  [batch, seq_kv, heads_kv, dim_v]
//   o  [batch, seq_q,  heads_q,  dim_v]
//   lse (fp32, natural log) [batch, heads_q, seq_q]
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashgen {

// e4m3: fp8 E4M3 (finite, largest 448, NaN 0x7f / 0xff; torch.float8_e4m3fn),
// the storage of a KV cache only (forward_with_kvcache's k_cache, v_cache).
enum class DType : int { f16 = 0, bf16 = 1, f32 = 2, e4m3 = 3 };
const char* to_string(DType dtype);
std::size_t size_of(DType dtype);

// Where a tensor's memory lives.
enum class MemoryKind : int { host = 0, cuda = 1 };

// A strided 4-D tensor [batch, seq, heads, dim]; strides count elements.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::bf16;
  std::int64_t shape[4] = {0, 0, 0, 0};
  std::int64_t stride[4] = {0, 0, 0, 0};
  MemoryKind memory = MemoryKind::host;
  int device = 0;  // CUDA ordinal when memory == cuda

  // Packed [batch, seq, heads, dim] (BSHD, the layout of flash_attn_func).
  static TensorView bshd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                         std::int64_t heads, std::int64_t dim,
                         MemoryKind memory = MemoryKind::host, int device = 0);
  // Packed [batch, heads, seq, dim] memory seen as [batch, seq, heads, dim]
  // (the layout of scaled_dot_product_attention).
  static TensorView bhsd(void* data, DType dtype, std::int64_t batch, std::int64_t seq,
                         std::int64_t heads, std::int64_t dim,
                         MemoryKind memory = MemoryKind::host, int device = 0);

  std::int64_t batch() const { return shape[0]; }
  std::int64_t seq() const { return shape[1]; }
  std::int64_t heads() const { return shape[2]; }
  std::int64_t dim() const { return shape[3]; }
  std::int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

// fp32 per-row statistics [batch, heads, seq] (the log-sum-exp); strides count elements.
struct RowStatsView {
  float* data = nullptr;
  std::int64_t shape[3] = {0, 0, 0};
  std::int64_t stride[3] = {0, 0, 0};
  MemoryKind memory = MemoryKind::host;
  int device = 0;

  static RowStatsView contiguous(float* data, std::int64_t batch, std::int64_t heads,
                                 std::int64_t seq, MemoryKind memory = MemoryKind::host,
                                 int device = 0);
};

// fp32 per-head values: [heads_q] (rank 1) or [batch, heads_q] (rank 2);
// strides count elements. data == nullptr means "not given".
struct HeadVectorView {
  float* data = nullptr;
  int rank = 1;
  std::int64_t shape[2] = {0, 0};
  std::int64_t stride[2] = {0, 0};
  MemoryKind memory = MemoryKind::host;
  int device = 0;

  static HeadVectorView heads(float* data, std::int64_t heads_q,
                              MemoryKind memory = MemoryKind::host, int device = 0);
  static HeadVectorView batch_heads(float* data, std::int64_t batch, std::int64_t heads_q,
                                    MemoryKind memory = MemoryKind::host, int device = 0);
  bool given() const { return data != nullptr; }
};

// A named 1-D array a mask expression reads (Options::mask_tensors): int32
// or fp32, `size` elements `stride` elements apart, in q's memory. `rank` is
// what the caller's array has: it must be 1 (a binding passes its array's
// rank through and validation refuses any other).
enum class MaskElement : int { int32 = 0, float32 = 1 };
struct MaskTensorView {
  std::string name;
  const void* data = nullptr;
  MaskElement element = MaskElement::int32;
  int rank = 1;
  std::int64_t size = 0;
  std::int64_t stride = 1;
  MemoryKind memory = MemoryKind::host;
  int device = 0;

  static MaskTensorView int32(std::string name, const std::int32_t* data, std::int64_t size,
                              MemoryKind memory = MemoryKind::host, int device = 0);
  static MaskTensorView float32(std::string name, const float* data, std::int64_t size,
                                MemoryKind memory = MemoryKind::host, int device = 0);
};

enum class Backend : int { automatic = 0, cuda = 1, cpu = 2 };
const char* to_string(Backend backend);

// Where the causal mask's diagonal sits when seq_q != seq_kv.
//   bottom_right: query i sees keys j <= i + seq_kv - seq_q (flash-attn >= 2.1,
//                 flash_attn_func(causal=True)); the default.
//   top_left:     query i sees keys j <= i (torch SDPA's is_causal).
enum class CausalAlignment : int { bottom_right = 0, top_left = 1 };
const char* to_string(CausalAlignment alignment);

struct Options {
  // Softmax scale; unset means 1 / sqrt(dim_qk).
  std::optional<double> scale;
  // Causal mask, aligned as causal_alignment says (bottom-right by default:
  // query i sees keys j <= i + seq_kv - seq_q, as FlashAttention >= 2.1).
  bool causal = false;
  CausalAlignment causal_alignment = CausalAlignment::bottom_right;

  // Masks and score modifiers, flash-attn 2's conventions (mask_mod is
  // FlexAttention's). The CPU backend runs them all; the CUDA backend runs
  // all but ALiBi together with a soft cap (refused for now), and mask_mod
  // with up to 8 mask_tensors.
  //
  // Sliding window: query i sees keys j with
  //   i + seq_kv - seq_q - window_left <= j <= i + seq_kv - seq_q + window_right
  // (always bottom-right aligned); -1 = unbounded on that side. Combines
  // with causal (both masks apply).
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  // Soft cap: s <- softcap · tanh(s / softcap) on the scaled scores; 0 = off.
  double softcap = 0.0;
  // ALiBi: s <- s - slope · |i + seq_kv - seq_q - j| on the scaled scores,
  // after the soft cap. fp32 [heads_q] or [batch, heads_q]; optional.
  HeadVectorView alibi_slopes;
  // Attention sinks (gpt-oss): one logit per query head that joins each
  // row's softmax denominator and carries no value. fp32 [heads_q];
  // optional. The log-sum-exp then includes it: LSE = log(Σ_j exp(s_j) +
  // exp(sink)), so a row that sees no key has O = 0 and LSE = sink.
  HeadVectorView sinks;
  // Backward output when sinks are given (required then, ignored by the
  // forward): fp32 [heads_q], overwritten with dL/dsink =
  // -Σ_{batch, rows} P_sink · rowsum(dO ∘ O), P_sink = exp(sink - LSE).
  HeadVectorView grad_sinks;
  // A user mask: a C expression over b, h, q_idx, kv_idx and the arrays of
  // mask_tensors, indexed as name[expr]; nonzero = the pair is attended.
  // Empty = off. It applies on top of causal and the window. Integers are
  // int64 (int32 array elements widen), fp32 arrays and literals are float;
  // C's rules otherwise (integer division truncates). An array index outside
  // [0, size) or an integer division by zero is an error, reported when the
  // pair is evaluated (C's && || ?: evaluate only what they need). q_idx
  // is query row i's position among the keys, i + seq_kv - seq_q (the
  // diagonal that bottom-right causal, the window and ALiBi use: the
  // query's row itself when seq_q = seq_kv). Under varlen and a KV cache, b
  // is the sequence and q_idx, kv_idx positions within it. A row left with
  // no key has O = 0 and LSE = -inf (the sink's logit with sinks); masked
  // pairs carry no gradient. README: "Mask expressions" has the grammar.
  std::string mask_mod;
  std::vector<MaskTensorView> mask_tensors;

  Backend backend = Backend::automatic;
  // true: bit-identical gradients run to run (two-kernel backward, no atomics).
  // false: the planner may pick the atomic-dQ backward when it is faster.
  bool deterministic = true;
  // CUDA stream (a CUstream / cudaStream_t) for GPU work; null = default stream.
  void* stream = nullptr;
  // CPU worker threads; 0 = all hardware threads.
  int cpu_threads = 0;
};

// lse may have data == nullptr: the forward then does not write it.
struct ForwardArgs {
  TensorView q, k, v;
  TensorView o;       // output
  RowStatsView lse;   // output (optional)
};

struct BackwardArgs {
  TensorView q, k, v, o, grad_o;
  RowStatsView lse;                   // from the forward
  TensorView grad_q, grad_k, grad_v;  // outputs
  // Optional device scratch of at least backward_workspace_bytes(); when null
  // the library allocates it on the stream and frees it after.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,  // the caller broke a rule; the message names argument and rule
  unsupported = 2,       // valid, but no backend can run it here (e.g. no GPU)
  runtime = 3,           // a driver, compiler or system failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// What will run for a problem, or why it cannot. supports_*() and the
// functions that compute call the same planner, so they cannot disagree.
struct Plan {
  bool ok = false;
  Backend backend = Backend::cpu;
  ErrorCode error = ErrorCode::ok;
  std::string reason;                // why not, when !ok
  std::vector<std::string> kernels;  // readable names of what will run
  std::size_t workspace_bytes = 0;   // device scratch the backward needs
};

Plan plan_forward(const ForwardArgs& args, const Options& options = {});
Plan plan_backward(const BackwardArgs& args, const Options& options = {});
bool supports_forward(const ForwardArgs& args, const Options& options = {});
bool supports_backward(const BackwardArgs& args, const Options& options = {});
std::size_t backward_workspace_bytes(const BackwardArgs& args, const Options& options = {});

// Throw flashgen::Error on bad input or failure; inputs are never modified.
void forward(const ForwardArgs& args, const Options& options = {});
void backward(const BackwardArgs& args, const Options& options = {});

// Environment facts for `flashgen info`.
struct SystemInfo {
  std::string version;
  bool cuda_available = false;
  std::string cuda_status;  // why not, or driver/NVRTC versions
  int device_count = 0;
  std::vector<std::string> devices;  // "NVIDIA H200 (sm_90, 132 SMs)"
  std::string cache_dir;
  int cpu_threads = 0;
  // The CPU backend's tile kernels: "amx", "avx512_bf16", "avx512", "avx2" or
  // "generic" (the best this CPU and OS run, or $FLASHGEN_CPU_ISA's).
  std::string cpu_isa;
};
SystemInfo system_info();
const char* version();

}  // namespace flashgen
