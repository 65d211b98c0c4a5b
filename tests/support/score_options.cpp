#include "score_options.hpp"

#include <algorithm>

#include "attention_check.hpp"

namespace flashgen::testing {
namespace {

// The host values, or a copy of them in CUDA memory (kept in `storage`).
template <class T>
T* in_memory(std::vector<T>& values, MemoryKind memory, std::unique_ptr<Storage>& storage) {
  if (memory != MemoryKind::cuda || values.empty()) return values.data();
  storage = stored(values, memory);
  return static_cast<T*>(storage->data());
}

}  // namespace

ScoreOptions::ScoreOptions(const ScoreSpec& spec, const Case& c, Backend backend)
    : mask_arrays_(std::max(c.seq_q, c.seq_kv), c.batch, c.heads_q) {
  options_.backend = backend;
  options_.causal_alignment = spec.alignment;
  options_.window_left = spec.window_left;
  options_.window_right = spec.window_right;
  options_.softcap = spec.softcap;
  const MemoryKind memory = memory_for(backend);
  if (spec.user_mask > 0) {
    const Options masked = mask_arrays_.options(test_mask(spec.user_mask));  // host views
    options_.mask_mod = masked.mask_mod;
    options_.mask_tensors = masked.mask_tensors;
  }
  host_options_ = options_;
  if (spec.user_mask > 0) {
    device_mask_arrays_.resize(3);
    MaskTensorView* views = options_.mask_tensors.data();  // doc, prefix, bias
    views[0].data = in_memory(mask_arrays_.doc, memory, device_mask_arrays_[0]);
    views[1].data = in_memory(mask_arrays_.prefix, memory, device_mask_arrays_[1]);
    views[2].data = in_memory(mask_arrays_.bias, memory, device_mask_arrays_[2]);
    for (MaskTensorView& view : options_.mask_tensors) view.memory = memory;
  }
  if (spec.alibi_rank > 0) {
    const std::int64_t batches = spec.alibi_rank == 2 ? c.batch : 1;
    for (std::int64_t b = 0; b < batches; ++b)
      for (std::int64_t h = 0; h < c.heads_q; ++h) slopes_.push_back(alibi_slope_value(b, h));
    const auto view = [&](float* data, MemoryKind where) {
      return spec.alibi_rank == 2 ? HeadVectorView::batch_heads(data, c.batch, c.heads_q, where)
                                  : HeadVectorView::heads(data, c.heads_q, where);
    };
    host_options_.alibi_slopes = view(slopes_.data(), MemoryKind::host);
    options_.alibi_slopes = view(in_memory(slopes_, memory, device_slopes_), memory);
  }
  if (spec.sinks) {
    for (std::int64_t h = 0; h < c.heads_q; ++h) sinks_.push_back(sink_value(h, c.heads_q));
    host_options_.sinks = HeadVectorView::heads(sinks_.data(), c.heads_q);
    options_.sinks =
        HeadVectorView::heads(in_memory(sinks_, memory, device_sinks_), c.heads_q, memory);
  }
}

}  // namespace flashgen::testing
