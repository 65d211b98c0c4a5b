"""Ring attention: exact attention over a sequence split across processes.

Each rank of a torch.distributed group holds a slice of the sequence: its
queries and the keys/values of the same positions. Key/value blocks travel
around the ring (rank r sends to r + 1 and receives from r - 1); at each step
a rank attends its queries to the visiting block with flashgen's forward and
merges the partial output exactly through the row log-sum-exps (_merge.py).
After world steps every rank has the exact output of its queries over the
whole sequence, with O(S_local) memory per rank.

    o = flashgen.ring_attention(q_local, k_local, v_local, causal=True)

Layout (ring_ranges, ring_shard, ring_unshard): without a mask rank r holds
the r-th of world equal contiguous slices. With causal=True the sequence is
cut into 2·world equal chunks and rank r holds chunks r and 2·world-1-r, in
that order: an early chunk (few keys before it) and a late one (many), so
every rank does the same work at every step.

The layout helpers work on numpy arrays and torch tensors and need no torch;
ring_attention needs PyTorch with torch.distributed (gloo on CPU, NCCL on
CUDA). docs/ring_attention.md describes the algorithm and its measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._arguments import check_bool, check_causal, check_scale
from ._merge import merge

__all__ = ["ring_attention", "ring_ranges", "ring_shard", "ring_unshard", "RingBlock",
           "ring_block"]

# The causal layout gives each rank one early and one late chunk.
CAUSAL_CHUNKS_PER_RANK = 2
SEQ_DIM = 1  # [batch, seq, heads, dim]


# ---------------------------------------------------------------------------
# Layout: which positions a rank holds (numpy or torch, no torch needed).
# ---------------------------------------------------------------------------

def _chunk_count(world: int, causal: bool) -> int:
    return CAUSAL_CHUNKS_PER_RANK * world if causal else world


def _check_world(rank: int, world: int) -> None:
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, world) = [0, {world}), got {rank}")


def ring_ranges(rank: int, world: int, seq_len: int, causal: bool) -> list:
    """Global positions held by `rank`, as ranges in local order.

    seq_len is the whole sequence's length; it must split into equal chunks:
    a multiple of world, or of 2·world with causal=True. Non-causal: one range
    [r·S/W, (r+1)·S/W). Causal: chunk r then chunk 2W-1-r, each of S/(2W)
    positions. Position ids for rotary embeddings are the concatenation of
    these ranges.
    """
    _check_world(rank, world)
    chunks = _chunk_count(world, causal)
    if seq_len < chunks or seq_len % chunks != 0:
        layout = f"2·world = {chunks} (causal layout)" if causal else f"world = {chunks}"
        raise ValueError(f"seq_len must be a positive multiple of {layout}, got {seq_len}; "
                         f"pad the sequence")
    chunk = seq_len // chunks
    owned = [rank, chunks - 1 - rank] if causal else [rank]
    return [range(c * chunk, (c + 1) * chunk) for c in owned]


def _seq_slice(x, seq_dim: int, start: int, stop: int):
    return x[(slice(None),) * seq_dim + (slice(start, stop),)]


def _concatenate(parts: list, seq_dim: int):
    """numpy.concatenate or torch.cat, chosen by the parts' type."""
    if type(parts[0]).__module__.split(".")[0] == "torch":
        import torch

        return torch.cat(parts, dim=seq_dim)
    import numpy as np

    return np.concatenate(parts, axis=seq_dim)


def _normalized_dim(x, seq_dim: int) -> int:
    if not -x.ndim <= seq_dim < x.ndim:
        raise ValueError(f"seq_dim {seq_dim} is out of range for {x.ndim} dimensions")
    return seq_dim % x.ndim


def ring_shard(x, rank: int, world: int, causal: bool, seq_dim: int = SEQ_DIM):
    """rank's local part of the full-sequence array x (numpy or torch).

    Non-causal: a view of one contiguous slice. Causal: a new array holding
    chunk r then chunk 2·world-1-r (see ring_ranges). seq_dim is the sequence
    axis (1 for [batch, seq, heads, dim]).
    """
    seq_dim = _normalized_dim(x, seq_dim)
    parts = [_seq_slice(x, seq_dim, r.start, r.stop)
             for r in ring_ranges(rank, world, x.shape[seq_dim], causal)]
    return parts[0] if len(parts) == 1 else _concatenate(parts, seq_dim)


def ring_unshard(shards, causal: bool, seq_dim: int = SEQ_DIM):
    """The full sequence from every rank's local part, given in rank order
    (e.g. the list torch.distributed.all_gather fills): ring_shard's inverse."""
    shards = list(shards)
    if not shards:
        raise ValueError("shards must hold one local part per rank, got none")
    world = len(shards)
    seq_dim = _normalized_dim(shards[0], seq_dim)
    local = shards[0].shape[seq_dim]
    for rank, shard in enumerate(shards):
        if shard.shape[seq_dim] != local:
            raise ValueError(f"shards[{rank}] holds {shard.shape[seq_dim]} positions but "
                             f"shards[0] holds {local}; every rank holds the same number")
    if not causal:
        return _concatenate(shards, seq_dim)
    if local % CAUSAL_CHUNKS_PER_RANK != 0:
        raise ValueError(f"causal shards hold two equal chunks, so an even length; got {local}")
    half = local // CAUSAL_CHUNKS_PER_RANK
    early = [_seq_slice(s, seq_dim, 0, half) for s in shards]            # chunks 0 .. W-1
    late = [_seq_slice(s, seq_dim, half, local) for s in reversed(shards)]  # chunks W .. 2W-1
    return _concatenate(early + late, seq_dim)


# ---------------------------------------------------------------------------
# Schedule: what a rank computes on a visiting block.
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RingBlock:
    """One flashgen call of a ring step: rows `queries` of the local queries
    attend to rows `keys` of the visiting keys/values, with flashgen's causal
    mask when `causal` (the two row sets then have equal lengths and cover the
    same positions, where bottom-right and top-left alignment agree)."""

    queries: slice
    keys: slice
    causal: bool


ALL_ROWS = slice(None)


def ring_block(rank: int, source: int, world: int, seq_local: int, causal: bool) -> RingBlock:
    """What `rank` computes on the keys/values that `source` holds.

    Non-causal: everything. Causal (rank r holds chunks r and 2W-1-r, source s
    holds s and 2W-1-s; query chunk a sees key chunk b fully when b < a, on
    the diagonal when b == a, not at all when b > a):
      s == r  both chunks against both: one causal call, since local order is
              global order (chunk r's keys all precede chunk 2W-1-r's);
      s <  r  both query chunks see chunk s fully, neither sees 2W-1-s
              (> 2W-1-r > r): all queries against the first half of the keys;
      s >  r  chunk r sees neither (s > r, 2W-1-s >= W > r); chunk 2W-1-r sees
              both: the second half of the queries against all keys.
    Each off-diagonal step is S_local²/2 scores: the load stays even.
    """
    _check_world(rank, world)
    _check_world(source, world)
    if not causal:
        return RingBlock(ALL_ROWS, ALL_ROWS, False)
    if seq_local % CAUSAL_CHUNKS_PER_RANK != 0:
        raise ValueError(f"the causal layout holds two equal chunks per rank, so the local "
                         f"sequence length must be even, got {seq_local}")
    half = seq_local // CAUSAL_CHUNKS_PER_RANK
    if source == rank:
        return RingBlock(ALL_ROWS, ALL_ROWS, True)
    if source < rank:
        return RingBlock(ALL_ROWS, slice(0, half), False)
    return RingBlock(slice(half, seq_local), ALL_ROWS, False)


def ring_source(rank: int, step: int, world: int) -> int:
    """The rank whose keys/values `rank` holds at `step`: blocks move to the
    next rank each step, so after t steps rank r holds block r - t."""
    return (rank - step) % world


# ---------------------------------------------------------------------------
# PyTorch: communication, forward, backward, autograd.
# ---------------------------------------------------------------------------

try:
    import torch
    import torch.distributed as dist
except ImportError:  # the layout helpers above work without PyTorch
    torch = None

if torch is not None:
    from . import _torch_ops
    from ._torch_views import check_inputs

    # Message tags: keys/values and their gradient sums can be in flight
    # between the same two ranks at once (gloo matches by tag).
    _KV_TAG = 0
    _GRAD_KV_TAG = 2

    _COMM_STREAMS: dict = {}

    def _comm_stream(device: torch.device):
        """One side stream per GPU for the ring's transfers."""
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in _COMM_STREAMS:
            _COMM_STREAMS[index] = torch.cuda.Stream(device=index)
        return _COMM_STREAMS[index]

    def _global_rank(group, group_rank: int) -> int:
        if group is None or group is dist.group.WORLD:
            return group_rank
        return dist.get_global_rank(group, group_rank)

    class _Transfer:
        """Sends and receives in flight; wait() makes their results visible
        to the current stream (CUDA) or the caller (CPU)."""

        def __init__(self, works, stream, device):
            self._works, self._stream, self._device = works, stream, device

        def wait(self) -> None:
            if self._stream is None:
                for work in self._works:
                    work.wait()
                return
            with torch.cuda.stream(self._stream):
                for work in self._works:
                    work.wait()  # the side stream waits for the transfers
            torch.cuda.current_stream(self._device).wait_stream(self._stream)

    class _Ring:
        """The ring of a process group: rank r sends to r + 1, receives from r - 1."""

        def __init__(self, group, device: torch.device):
            if not dist.is_available() or not dist.is_initialized():
                raise ValueError("group: torch.distributed is not initialized; call "
                                 "torch.distributed.init_process_group first (a group of "
                                 "one process runs plain attention)")
            self.group = group
            self.rank = dist.get_rank(group)
            if self.rank < 0:
                raise ValueError("group: this process is not a member of the group")
            self.world = dist.get_world_size(group)
            self.next_peer = _global_rank(group, (self.rank + 1) % self.world)
            self.prev_peer = _global_rank(group, (self.rank - 1) % self.world)
            self.device = device
            self.stream = _comm_stream(device) if device.type == "cuda" else None

        def start(self, send: tuple, recv: tuple, tag: int) -> _Transfer:
            """Sends `send` to the next rank and receives `recv` from the
            previous one, asynchronously. On CUDA the transfers run on a side
            stream that first waits for the work already queued on the current
            stream (which wrote `send` and last read `recv`)."""
            ops = [dist.P2POp(dist.isend, t, self.next_peer, self.group, tag + i)
                   for i, t in enumerate(send)]
            ops += [dist.P2POp(dist.irecv, t, self.prev_peer, self.group, tag + i)
                    for i, t in enumerate(recv)]
            if self.stream is None:
                return _Transfer(dist.batch_isend_irecv(ops), None, self.device)
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                self.stream.wait_event(ready)
                # The process group's own transfer stream waits for this one.
                works = dist.batch_isend_irecv(ops)
            return _Transfer(works, self.stream, self.device)

    def _block_forward(q, k, v, causal, scale, deterministic):
        """(o, lse) of one block; o in q's dtype, lse fp32 [b, h, s_q]."""
        off = _torch_ops.SCORE_OPTIONS_OFF
        if _torch_ops._HAS_CUSTOM_OP:
            return torch.ops.flashgen.attention_forward(q, k, v, causal, scale, deterministic,
                                                        False, *off)
        return _torch_ops._forward_impl(q, k, v, causal, scale, deterministic, False, *off)

    def _block_backward(grad_o, q, k, v, o, lse, causal, scale, deterministic):
        """(dq, dk, dv) of one block given the final o and the global lse: the
        kernels' P = exp(s - lse) is then the global probability and
        Dterm = rowsum(dO ∘ O) the global one, so each block's gradient is its
        exact share of the total."""
        off = _torch_ops.SCORE_OPTIONS_OFF
        if _torch_ops._HAS_CUSTOM_OP:
            return torch.ops.flashgen.attention_backward(grad_o, q, k, v, o, lse, causal,
                                                         scale, deterministic, False, *off)[:3]
        return _torch_ops._backward_impl(grad_o, q, k, v, o, lse, causal, scale, deterministic,
                                         False, *off)[:3]

    def _ring_forward(ring: _Ring, q, k, v, causal, scale, deterministic):
        """o [b, s, h, dv] in q's dtype and the global lse fp32 [b, h, s]."""
        seq_local = q.shape[SEQ_DIM]
        o_sum = lse_sum = None  # fp32 running merge
        kv, spare = (k, v), None
        for step in range(ring.world):
            transfer = None
            if step + 1 < ring.world:
                # Double buffer: the next block arrives while this one is used.
                incoming = spare or (torch.empty_like(k), torch.empty_like(v))
                transfer = ring.start(kv, incoming, _KV_TAG)
            block = ring_block(ring.rank, ring_source(ring.rank, step, ring.world),
                               ring.world, seq_local, causal)
            rows = block.queries
            o_part, lse_part = _block_forward(q[:, rows], kv[0][:, block.keys],
                                              kv[1][:, block.keys], block.causal, scale,
                                              deterministic)
            if step == 0:  # the rank's own block covers every query row
                o_sum, lse_sum = o_part.float(), lse_part
            else:
                o_sum[:, rows], lse_sum[:, :, rows] = merge(o_sum[:, rows], lse_sum[:, :, rows],
                                                            o_part, lse_part)
            if transfer is not None:
                transfer.wait()
                # The caller's k, v are never overwritten: only buffers of
                # our own become receive buffers.
                spare = kv if step > 0 else None
                kv = incoming
        return o_sum.to(q.dtype), lse_sum

    def _ring_backward(ring: _Ring, grad_o, q, k, v, o, lse, causal, scale, deterministic):
        """(dq, dk, dv) of this rank's q, k, v.

        Keys/values rotate as in the forward; with each block travels the fp32
        sum of its dK/dV contributions so far. A rank adds its share and passes
        the sum on; one extra hop after the last step brings every block's
        complete sum home. The sum for block s is added in the order s, s+1,
        ..., s-1, so the result is the same run to run.
        """
        seq_local = q.shape[SEQ_DIM]
        grad_q = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        kv, spare = (k, v), None
        # Two fp32 [b, s, h_kv, d] pairs: one accumulates and is sent while
        # the other receives the previous rank's sum for the next step.
        grad_kv_sums = [(torch.zeros(k.shape, dtype=torch.float32, device=k.device),
                         torch.zeros(v.shape, dtype=torch.float32, device=v.device))]
        grad_transfer = None
        for step in range(ring.world):
            kv_transfer = None
            if step + 1 < ring.world:
                incoming = spare or (torch.empty_like(k), torch.empty_like(v))
                kv_transfer = ring.start(kv, incoming, _KV_TAG)
            block = ring_block(ring.rank, ring_source(ring.rank, step, ring.world),
                               ring.world, seq_local, causal)
            rows, keys = block.queries, block.keys
            grad_q_part, grad_k_part, grad_v_part = _block_backward(
                grad_o[:, rows], q[:, rows], kv[0][:, keys], kv[1][:, keys], o[:, rows],
                lse[:, :, rows], block.causal, scale, deterministic)
            grad_q[:, rows] += grad_q_part
            if grad_transfer is not None:
                grad_transfer.wait()  # the previous ranks' sum for this block
            grad_k_sum, grad_v_sum = grad_kv_sums[step % 2]
            grad_k_sum[:, keys] += grad_k_part
            grad_v_sum[:, keys] += grad_v_part
            if ring.world > 1:
                if len(grad_kv_sums) == 1:
                    grad_kv_sums.append((torch.empty_like(grad_k_sum),
                                         torch.empty_like(grad_v_sum)))
                grad_transfer = ring.start((grad_k_sum, grad_v_sum),
                                           grad_kv_sums[(step + 1) % 2], _GRAD_KV_TAG)
            if kv_transfer is not None:
                kv_transfer.wait()
                spare = kv if step > 0 else None
                kv = incoming
        if grad_transfer is not None:
            grad_transfer.wait()  # this rank's own block, summed over every rank
            grad_k_sum, grad_v_sum = grad_kv_sums[ring.world % 2]
        return grad_q.to(q.dtype), grad_k_sum.to(k.dtype), grad_v_sum.to(v.dtype)

    class _RingAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, ring, causal, scale, deterministic):
            o, lse = _ring_forward(ring, q, k, v, causal, scale, deterministic)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.ring, ctx.causal, ctx.scale, ctx.deterministic = ring, causal, scale, deterministic
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, grad_o, grad_lse):
            q, k, v, o, lse = ctx.saved_tensors
            grads = _ring_backward(ctx.ring, grad_o, q, k, v, o, lse, ctx.causal, ctx.scale,
                                   ctx.deterministic)
            return (*grads, None, None, None, None)

    def _check_ring_inputs(q, k, v, causal: bool) -> None:
        check_inputs({"q": q, "k": k, "v": v})
        seq_q, seq_kv = q.shape[SEQ_DIM], k.shape[SEQ_DIM]
        if seq_kv != seq_q:
            raise ValueError(f"k holds {seq_kv} positions but q holds {seq_q}; a rank holds "
                             f"the queries, keys and values of the same positions")
        if seq_q < 1:
            raise ValueError("q must hold at least one position per rank")
        if causal and seq_q % CAUSAL_CHUNKS_PER_RANK != 0:
            raise ValueError(f"q holds {seq_q} positions; the causal layout holds two equal "
                             f"chunks per rank, so the local length must be even "
                             f"(see flashgen.ring_shard)")

    def ring_attention(q, k, v, group=None, causal: bool = False, scale: float | None = None,
                       deterministic: bool = True, *, return_lse: bool = False):
        """Exact attention over a sequence split across the ranks of `group`.

        q [batch, s_local, heads_q, dim_qk], k [batch, s_local, heads_kv, dim_qk],
        v [batch, s_local, heads_kv, dim_v]: this rank's positions in the
        ring layout (flashgen.ring_shard; for causal=True the load-balanced
        layout of two chunks per rank). Every rank passes the same shapes,
        dtype and options. Returns o [batch, s_local, heads_q, dim_v] in q's
        dtype: the rows of softmax(scale · Q·Kᵀ) · V over the whole sequence
        (causal: keys at or before the query's global position). Differentiable:
        the backward returns this rank's dq, dk, dv.

        group: a torch.distributed process group (default: the world), gloo for
        CPU tensors, NCCL for CUDA tensors. scale defaults to 1/sqrt(dim_qk).
        deterministic=True keeps the flashgen backward free of atomics; the
        ring's own sums are always in a fixed order. return_lse=True also
        returns the global row log-sum-exp, fp32 [batch, heads_q, s_local]
        (not differentiable).

        Memory: the inputs, two key/value blocks and, in the backward, two fp32
        dK/dV sums. Raises TypeError/ValueError like flashgen.attention, and
        ValueError when torch.distributed is not initialized.
        """
        causal, scale = check_causal(causal), check_scale(scale)
        deterministic = check_bool("deterministic", deterministic)
        _check_ring_inputs(q, k, v, causal)
        ring = _Ring(group, q.device)
        if ring.world == 1:
            # The rank's own block is the whole sequence: plain attention,
            # without the ring's fp32 buffers.
            o, lse = _torch_ops.attention_forward(q, k, v, causal, scale, deterministic, False,
                                                  *_torch_ops.SCORE_OPTIONS_OFF)
        else:
            # Point-to-point transfers send whole, dense tensors.
            k, v = k.contiguous(), v.contiguous()
            o, lse = _RingAttention.apply(q, k, v, ring, causal, scale, deterministic)
        return (o, lse) if return_lse else o

else:

    def ring_attention(*args, **kwargs):
        """Needs PyTorch with torch.distributed."""
        raise ImportError("flashgen.ring_attention needs PyTorch (pip install torch)")
