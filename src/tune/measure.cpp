#include "tune/measure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/dtype.hpp"
#include "cpu/correctness_rule.hpp"
#include "cpu/reference.hpp"

namespace flashgen {
namespace {

// The small problem of ReferenceCheck (see measure.hpp for why this shape).
constexpr std::int64_t kCheckBatch = 1;
constexpr std::int64_t kCheckHeadsQ = 2;
constexpr std::int64_t kCheckHeadsKv = 1;
constexpr std::int64_t kCheckSeqQ = 300;
constexpr std::int64_t kCheckSeqKv = 277;
constexpr std::uint64_t kCheckSeed = 0x7475'6e65;  // fixed: every candidate sees the same inputs

// Magnitudes of random inputs: [kSmallest, 1], either sign (as tools/workload).
constexpr float kSmallest = 1.0f / 64.0f;
// NaN in every dtype: an element a candidate forgets to write fails.
constexpr unsigned char kPoisonByte = 0xff;

std::uint64_t next_random(std::uint64_t& state) {  // splitmix64
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<unsigned char> random_values(DType dtype, std::int64_t count, std::uint64_t& state) {
  std::vector<unsigned char> bytes(static_cast<std::size_t>(count) * size_of(dtype));
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t bits = next_random(state);
    const float magnitude =
        kSmallest + static_cast<float>(static_cast<double>(bits >> 11) * kUnit) * (1 - kSmallest);
    store_from_float(bytes.data(), dtype, i, (bits & 1u) ? -magnitude : magnitude);
  }
  return bytes;
}

// "" when `out` passes the rule, else "name max|out-ref| e > bound b".
std::string judge(const char* name, const std::vector<double>& out,
                  const std::vector<double>& naive, const std::vector<double>& ref,
                  DType precision) {
  const cpu::RuleCheck c =
      cpu::apply_correctness_rule(out, naive, ref, cpu::absolute_slack(precision));
  if (c.pass) return "";
  char text[160];
  std::snprintf(text, sizeof(text), "%s max|out-ref| %.3e > bound %.3e", name, c.error, c.bound);
  return text;
}

std::vector<double> as_double(const std::vector<unsigned char>& bytes, DType dtype) {
  std::vector<double> out(bytes.size() / size_of(dtype));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = load_as_float(bytes.data(), dtype, static_cast<std::int64_t>(i));
  return out;
}

std::vector<unsigned char> download(const cuda::DeviceBuffer& b) {
  std::vector<unsigned char> bytes(b.bytes());
  b.download(bytes.data(), bytes.size());
  return bytes;
}

}  // namespace

bool is_backward_kind(KernelKind kind) { return kind != KernelKind::forward; }
bool deterministic_for(KernelKind kind) { return kind != KernelKind::backward_atomic; }

double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

// ---- ReferenceCheck ----

struct ReferenceCheck::Buffers {
  cuda::DeviceBuffer q, k, v, grad_o;                 // inputs, [batch, seq, heads, dim]
  cuda::DeviceBuffer o, lse, grad_q, grad_k, grad_v;  // outputs; lse [batch, heads_q, seq_q] fp32
  ForwardArgs forward;
  BackwardArgs backward;
  cpu::ForwardResult ref_forward, naive_forward;
  cpu::BackwardResult ref_backward, naive_backward;
};

ReferenceCheck::ReferenceCheck(DType dtype, int dim_qk, int dim_v, bool causal, int threads)
    : buffers_(std::make_unique<Buffers>()) {
  Problem& p = problem_;
  p.batch = kCheckBatch;
  p.heads_q = kCheckHeadsQ;
  p.heads_kv = kCheckHeadsKv;
  p.seq_q = kCheckSeqQ;
  p.seq_kv = kCheckSeqKv;
  p.dim_qk = dim_qk;
  p.dim_v = dim_v;
  p.dtype = dtype;
  p.causal = causal;
  p.scale = 1.0 / std::sqrt(static_cast<double>(dim_qk));

  std::uint64_t state = kCheckSeed + static_cast<std::uint64_t>(dim_qk * 1000 + dim_v);
  const std::int64_t n_q = p.batch * p.seq_q * p.heads_q * dim_qk;
  const std::int64_t n_k = p.batch * p.seq_kv * p.heads_kv * dim_qk;
  const std::int64_t n_v = p.batch * p.seq_kv * p.heads_kv * dim_v;
  const std::int64_t n_o = p.batch * p.seq_q * p.heads_q * dim_v;
  std::vector<unsigned char> q = random_values(dtype, n_q, state);
  std::vector<unsigned char> k = random_values(dtype, n_k, state);
  std::vector<unsigned char> v = random_values(dtype, n_v, state);
  std::vector<unsigned char> grad_o = random_values(dtype, n_o, state);

  // The fp64 reference and the naive yardstick, once for every candidate.
  const TensorView hq = TensorView::bshd(q.data(), dtype, p.batch, p.seq_q, p.heads_q, dim_qk);
  const TensorView hk = TensorView::bshd(k.data(), dtype, p.batch, p.seq_kv, p.heads_kv, dim_qk);
  const TensorView hv = TensorView::bshd(v.data(), dtype, p.batch, p.seq_kv, p.heads_kv, dim_v);
  const TensorView hdo = TensorView::bshd(grad_o.data(), dtype, p.batch, p.seq_q, p.heads_q, dim_v);
  const cpu::PackedInputs in = cpu::pack_inputs(hq, hk, hv, &hdo);
  Buffers& b = *buffers_;
  b.ref_backward = cpu::reference_backward(p, in, threads, &b.ref_forward);
  b.naive_backward = cpu::naive_same_dtype_backward(p, in, threads, &b.naive_forward);

  const int device = cuda::current_device();
  auto upload = [](const std::vector<unsigned char>& host) {
    cuda::DeviceBuffer buffer(host.size());
    buffer.upload(host.data(), host.size());
    return buffer;
  };
  b.q = upload(q);
  b.k = upload(k);
  b.v = upload(v);
  b.grad_o = upload(grad_o);
  const std::size_t element = size_of(dtype);
  b.o = cuda::DeviceBuffer(static_cast<std::size_t>(n_o) * element);
  b.grad_q = cuda::DeviceBuffer(static_cast<std::size_t>(n_q) * element);
  b.grad_k = cuda::DeviceBuffer(static_cast<std::size_t>(n_k) * element);
  b.grad_v = cuda::DeviceBuffer(static_cast<std::size_t>(n_v) * element);
  b.lse =
      cuda::DeviceBuffer(sizeof(float) * static_cast<std::size_t>(p.batch * p.heads_q * p.seq_q));

  auto view = [&](const cuda::DeviceBuffer& buffer, std::int64_t seq, std::int64_t heads,
                  std::int64_t dim) {
    return TensorView::bshd(buffer.data(), dtype, p.batch, seq, heads, dim, MemoryKind::cuda,
                            device);
  };
  b.forward.q = view(b.q, p.seq_q, p.heads_q, dim_qk);
  b.forward.k = view(b.k, p.seq_kv, p.heads_kv, dim_qk);
  b.forward.v = view(b.v, p.seq_kv, p.heads_kv, dim_v);
  b.forward.o = view(b.o, p.seq_q, p.heads_q, dim_v);
  b.forward.lse = RowStatsView::contiguous(static_cast<float*>(b.lse.data()), p.batch, p.heads_q,
                                           p.seq_q, MemoryKind::cuda, device);
  b.backward.q = b.forward.q;
  b.backward.k = b.forward.k;
  b.backward.v = b.forward.v;
  b.backward.o = b.forward.o;
  b.backward.lse = b.forward.lse;
  b.backward.grad_o = view(b.grad_o, p.seq_q, p.heads_q, dim_v);
  b.backward.grad_q = view(b.grad_q, p.seq_q, p.heads_q, dim_qk);
  b.backward.grad_k = view(b.grad_k, p.seq_kv, p.heads_kv, dim_qk);
  b.backward.grad_v = view(b.grad_v, p.seq_kv, p.heads_kv, dim_v);
}

ReferenceCheck::~ReferenceCheck() = default;

std::string ReferenceCheck::check(KernelKind kind) const {
  Buffers& b = *buffers_;
  const DType dtype = problem_.dtype;
  Options options;
  options.backend = Backend::cuda;
  options.causal = problem_.causal;
  options.deterministic = deterministic_for(kind);
  try {
    for (cuda::DeviceBuffer* output : {&b.o, &b.lse, &b.grad_q, &b.grad_k, &b.grad_v})
      output->fill_bytes(kPoisonByte);
    forward(b.forward, options);
    if (is_backward_kind(kind)) backward(b.backward, options);
    cuda::synchronize();
  } catch (const Error& e) {
    return std::string("the call failed: ") + e.what();
  }
  std::string failure =
      judge("O", as_double(download(b.o), dtype), b.naive_forward.o, b.ref_forward.o, dtype);
  if (failure.empty())
    failure = judge("LSE", as_double(download(b.lse), DType::f32), b.naive_forward.lse,
                    b.ref_forward.lse, DType::f32);
  if (!failure.empty() || !is_backward_kind(kind)) return failure;
  failure = judge("dQ", as_double(download(b.grad_q), dtype), b.naive_backward.grad_q,
                  b.ref_backward.grad_q, dtype);
  if (failure.empty())
    failure = judge("dK", as_double(download(b.grad_k), dtype), b.naive_backward.grad_k,
                    b.ref_backward.grad_k, dtype);
  if (failure.empty())
    failure = judge("dV", as_double(download(b.grad_v), dtype), b.naive_backward.grad_v,
                    b.ref_backward.grad_v, dtype);
  return failure;
}

// ---- Timer ----

Timer::Timer(std::vector<ForwardArgs> forward, std::vector<BackwardArgs> backward, bool causal,
             TimingSettings settings)
    : forward_(std::move(forward)), backward_(std::move(backward)), settings_(settings) {
  if (forward_.empty())
    throw Error(ErrorCode::invalid_argument, "Timer: at least one input set is needed");
  options_.backend = Backend::cuda;
  options_.causal = causal;
  if (!backward_.empty()) {
    // Scratch allocated once, outside the timed calls, large enough for both variants.
    Options atomic = options_;
    atomic.deterministic = false;
    const std::size_t bytes = std::max(backward_workspace_bytes(backward_[0], options_),
                                       backward_workspace_bytes(backward_[0], atomic));
    workspace_ = std::make_shared<cuda::DeviceBuffer>(bytes);
    for (BackwardArgs& a : backward_) {
      a.workspace = workspace_->data();
      a.workspace_bytes = workspace_->bytes();
    }
  }
}

void Timer::prepare_backward() const {
  for (const ForwardArgs& a : forward_) forward(a, options_);
  cuda::synchronize();
}

std::vector<double> Timer::time_calls(KernelKind kind, int warmup, int repeats) const {
  Options options = options_;
  options.deterministic = deterministic_for(kind);
  std::size_t call = 0;
  const cuda::StreamHandle default_stream = nullptr;
  if (!is_backward_kind(kind))
    return cuda::time_ms([&] { forward(forward_[call++ % forward_.size()], options); },
                         default_stream, warmup, repeats);
  if (backward_.empty())
    throw Error(ErrorCode::invalid_argument,
                "Timer: no backward inputs to time " + std::string(to_string(kind)));
  return cuda::time_ms([&] { backward(backward_[call++ % backward_.size()], options); },
                       default_stream, warmup, repeats);
}

Measurement Timer::time(KernelKind kind, double best_ms) const {
  Measurement m;
  std::vector<double> times = time_calls(kind, settings_.warmup, settings_.quick_repeats);
  m.ms = median_of(times);
  if (best_ms > 0 && m.ms > settings_.cutoff * best_ms) {
    m.cut = true;
    return m;
  }
  const int more = settings_.repeats - settings_.quick_repeats;
  if (more > 0) {
    const std::vector<double> rest = time_calls(kind, 0, more);
    times.insert(times.end(), rest.begin(), rest.end());
    m.ms = median_of(times);
  }
  return m;
}

double Timer::time_full(KernelKind kind) const {
  return median_of(time_calls(kind, settings_.warmup, settings_.repeats));
}

}  // namespace flashgen
