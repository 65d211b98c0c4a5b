/* flashgen C API: flat functions over the C++ library for Python (ctypes) and
 * other languages. No exception crosses it: every call returns an fg_status,
 * and fg_last_error() gives the message of the calling thread's last failure. */
#ifndef FLASHGEN_H
#define FLASHGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  FG_OK = 0,
  FG_INVALID_ARGUMENT = 1, /* the message names the argument and the rule */
  FG_UNSUPPORTED = 2,      /* valid, but no backend can run it here */
  FG_RUNTIME = 3           /* driver, compiler or system failure */
} fg_status;

/* FG_E4M3: fp8, the storage of a KV cache only (fg_kvcache). */
typedef enum { FG_F16 = 0, FG_BF16 = 1, FG_F32 = 2, FG_E4M3 = 3 } fg_dtype;
typedef enum { FG_HOST = 0, FG_CUDA = 1 } fg_memory;
typedef enum { FG_BACKEND_AUTO = 0, FG_BACKEND_CUDA = 1, FG_BACKEND_CPU = 2 } fg_backend;

/* [batch, seq, heads, dim]; strides count elements. */
typedef struct {
  void* data;
  int32_t dtype;  /* fg_dtype */
  int32_t memory; /* fg_memory */
  int32_t device; /* CUDA ordinal */
  int32_t reserved;
  int64_t shape[4];
  int64_t stride[4];
} fg_tensor;

/* fp32 [batch, heads, seq]; strides count elements. */
typedef struct {
  float* data;
  int32_t memory;
  int32_t device;
  int64_t shape[3];
  int64_t stride[3];
} fg_row_stats;

/* fp32 per-head values: [heads_q] (rank 1) or [batch, heads_q] (rank 2);
 * strides count elements; data NULL = not given. */
typedef struct {
  float* data;
  int32_t memory; /* fg_memory */
  int32_t device;
  int32_t rank;
  int32_t reserved;
  int64_t shape[2];
  int64_t stride[2];
} fg_head_vector;

/* Where the causal diagonal sits when seq_q != seq_kv. */
typedef enum {
  FG_CAUSAL_BOTTOM_RIGHT = 0, /* query i sees keys j <= i + seq_kv - seq_q (flash-attn) */
  FG_CAUSAL_TOP_LEFT = 1      /* query i sees keys j <= i (torch SDPA's is_causal) */
} fg_causal_alignment;

/* A named 1-D array a mask expression reads (fg_options.mask_tensors):
 * int32 or fp32, `size` elements `stride` elements apart, in q's memory.
 * rank is the caller's array's rank; it must be 1. */
typedef enum { FG_MASK_INT32 = 0, FG_MASK_FLOAT32 = 1 } fg_mask_dtype;
typedef struct {
  const char* name; /* NUL-terminated identifier */
  const void* data;
  int32_t dtype;  /* fg_mask_dtype */
  int32_t memory; /* fg_memory */
  int32_t device;
  int32_t rank;
  int64_t size;
  int64_t stride;
} fg_mask_tensor;

/* Always fill with fg_options_init() first: fields are only ever appended, and
 * the initializer sets every one (new ones included) to its default. */
typedef struct {
  double scale;          /* used when has_scale != 0, else 1/sqrt(dim_qk) */
  int32_t has_scale;
  int32_t causal;        /* bottom-right aligned */
  int32_t backend;       /* fg_backend */
  int32_t deterministic; /* 1: two-kernel backward without atomics */
  void* stream;          /* CUstream / cudaStream_t, NULL = default */
  int32_t cpu_threads;   /* 0 = all hardware threads */
  int32_t reserved;
  /* Masks and score modifiers (flash-attn 2 conventions; the CUDA backend runs
   * all but ALiBi together with softcap, which it refuses for now, and
   * mask_mod with up to 8 mask tensors). Defaults: all off. */
  int64_t window_left;          /* query i sees keys j >= i + seq_kv - seq_q - left; -1 = unbounded */
  int64_t window_right;         /* ... and j <= i + seq_kv - seq_q + right; -1 = unbounded */
  double softcap;               /* s <- softcap * tanh(s / softcap); 0 = off */
  int32_t causal_alignment;     /* fg_causal_alignment */
  int32_t reserved2;
  fg_head_vector alibi_slopes;  /* s <- s - slope * |i + seq_kv - seq_q - j|; [heads_q] or [batch, heads_q] */
  fg_head_vector sinks;         /* per-head logit in the softmax denominator; [heads_q] */
  fg_head_vector grad_sinks;    /* backward output with sinks: dL/dsink, [heads_q] */
  /* A user mask: a C expression over b, h, q_idx, kv_idx and the arrays of
   * mask_tensors (flashgen.hpp, Options::mask_mod, has the rules); nonzero =
   * attended. NULL or "" = off. */
  const char* mask_mod;
  const fg_mask_tensor* mask_tensors; /* mask_tensor_count entries */
  int64_t mask_tensor_count;
} fg_options;

void fg_options_init(fg_options* options);

/* lse may be NULL (not written). */
int fg_forward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v, const fg_tensor* o,
               const fg_row_stats* lse, const fg_options* options);

/* workspace may be NULL (allocated on the stream); see fg_backward_workspace_bytes. */
int fg_backward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v, const fg_tensor* o,
                const fg_tensor* grad_o, const fg_row_stats* lse, const fg_tensor* grad_q,
                const fg_tensor* grad_k, const fg_tensor* grad_v, void* workspace,
                size_t workspace_bytes, const fg_options* options);

int fg_backward_workspace_bytes(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                                const fg_tensor* o, const fg_tensor* grad_o,
                                const fg_row_stats* lse, const fg_tensor* grad_q,
                                const fg_tensor* grad_k, const fg_tensor* grad_v,
                                const fg_options* options, size_t* bytes);

/* FG_OK when the problem can run with these options; otherwise the status
 * and fg_last_error() say why. Same planner as fg_forward / fg_backward. */
int fg_supports_forward(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                        const fg_tensor* o, const fg_row_stats* lse, const fg_options* options);

/* Ragged batches and KV caches (see flashgen/sequences.hpp for the layouts
 * and rules). int32 indices, rank 1 ([n], shape[1] = 1) or 2; strides count
 * elements. */
typedef struct {
  const int32_t* data;
  int32_t memory;
  int32_t device;
  int64_t shape[2];
  int64_t stride[2];
} fg_index;

/* Varlen: q, k, v, o are [1, total, heads, dim]; lse [1, heads_q, total_q]
 * (NULL: not written); cu_seqlens_* [batch + 1].
 * check_indices: nonzero checks device-resident cu_seqlens (and the
 * max_seqlens) on the host first, waiting for the stream; 0 leaves them to
 * the kernels (flashgen/sequences.hpp). */
typedef struct {
  const fg_index* cu_seqlens_q;
  const fg_index* cu_seqlens_k;
  int64_t max_seqlen_q;
  int64_t max_seqlen_k;
  int check_indices;
} fg_varlen;

int fg_forward_varlen(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                      const fg_tensor* o, const fg_row_stats* lse, const fg_varlen* sequences,
                      const fg_options* options);

int fg_backward_varlen(const fg_tensor* q, const fg_tensor* k, const fg_tensor* v,
                       const fg_tensor* o, const fg_tensor* grad_o, const fg_row_stats* lse,
                       const fg_tensor* grad_q, const fg_tensor* grad_k, const fg_tensor* grad_v,
                       const fg_varlen* sequences, const fg_options* options);

/* KV cache: block_table NULL for a contiguous cache; k_new and v_new NULL
 * to append nothing; lse NULL: not written. Writes the appended rows into
 * k_cache and v_cache (the only arguments the call modifies).
 * check_indices: nonzero checks device-resident cache_seqlens and
 * block_table on the host first (the call waits for the stream).
 * k_scale, v_scale: FG_E4M3 caches' fp32 scales, [1] or [heads_kv] (data
 * NULL: 1); see KVCacheForwardArgs in flashgen/sequences.hpp. */
typedef struct {
  const fg_tensor* k_cache;
  const fg_tensor* v_cache;
  const fg_index* cache_seqlens;
  const fg_index* block_table;
  const fg_tensor* k_new;
  const fg_tensor* v_new;
  int check_indices;
  fg_head_vector k_scale;
  fg_head_vector v_scale;
} fg_kvcache;

int fg_forward_with_kvcache(const fg_tensor* q, const fg_kvcache* cache, const fg_tensor* o,
                            const fg_row_stats* lse, const fg_options* options);

/* Message of this thread's last failing call ("" if none). */
const char* fg_last_error(void);
const char* fg_version(void);
/* 1 when a CUDA device can run kernels here, else 0 (fg_last_error says why). */
int fg_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHGEN_H */
