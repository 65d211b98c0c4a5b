"""flashgen.ring_attention across processes against attention on the whole
sequence in one process.

Each case spawns `world` processes (torch.multiprocessing) that join a gloo
group on the CPU (NCCL on GPUs when two or more are present); every rank
checks its shard of o, lse, dq, dk and dv against flashgen.attention on the
full sequence and the float64 reference, with the tolerance rule of
torch_reference.py. Skipped where PyTorch is missing.
"""

from __future__ import annotations

import datetime
import time

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import flashgen  # noqa: E402
from attention_reference import ATOL  # noqa: E402
from torch_reference import (DTYPE_NAMES, max_error, naive_attention, random_inputs,  # noqa: E402
                             sdpa_reference)

# (causal, (batch, heads_q, heads_kv, dim_qk, dim_v))
CASES = [
    (False, (2, 4, 2, 40, 40)),     # GQA
    (True, (2, 4, 2, 40, 40)),
    (False, (1, 4, 2, 127, 127)),   # odd D: rows only 2-byte aligned in bf16
    (True, (1, 4, 2, 127, 127)),
    (True, (1, 6, 1, 72, 40)),      # MQA, dim_v != dim_qk
]
# Positions per causal chunk; the sequence is 2 · world chunks, so every rank
# holds 2 · CHUNK positions in both layouts. Odd, so blocks have ragged edges.
CHUNK = {"cpu": 7, "cuda": 67}
SUBGROUP_WORLD = 2
# A hung ring (mismatched sends) must fail the test, not stall the suite.
TIMEOUT_S = 120
POLL_S = 0.5


def _assert_ring_close(name, ring_out, whole, ref, naive, dtype) -> None:
    """ring_out (this rank's shard) obeys FlashAttention's rule against the
    float64 reference, and is as close to flashgen on the whole sequence."""
    bound = 2 * max_error(naive, ref) + ATOL[DTYPE_NAMES[dtype]]
    error_ref, error_whole = max_error(ring_out, ref), max_error(ring_out, whole)
    assert error_ref <= bound, f"{name}: error {error_ref:.3g} > bound {bound:.3g} vs float64"
    assert error_whole <= bound, (f"{name}: differs from flashgen.attention on the whole "
                                  f"sequence by {error_whole:.3g} > {bound:.3g}")


def _check_case(rank, world, device, dtype, causal, shape, group=None) -> None:
    """rank and world are those of `group` (default: the whole world)."""
    batch, heads_q, heads_kv, dim_qk, dim_v = shape
    seq = 2 * world * CHUNK[device.type]
    q, k, v, do = random_inputs((batch, seq, seq, heads_q, heads_kv, dim_qk, dim_v), dtype,
                                device, seed=dim_qk + world)

    def shard(t, seq_dim=1):
        return flashgen.ring_shard(t.detach(), rank, world, causal, seq_dim=seq_dim)

    # Whole sequence, one process: flashgen, float64 reference, naive same-dtype.
    o, lse = flashgen.attention(q, k, v, causal=causal, return_lse=True)
    grads = torch.autograd.grad(o, (q, k, v), do)
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o_ref, lse_ref = sdpa_reference(*leaves64, causal=causal, scale=None, layout="bshd")
    grads_ref = torch.autograd.grad(o_ref, leaves64, do.double())
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    o_naive, lse_naive = naive_attention(*leaves, causal=causal, scale=None, layout="bshd")
    grads_naive = torch.autograd.grad(o_naive, leaves, do)

    # This rank's part of the ring.
    local = [shard(t).clone().requires_grad_() for t in (q, k, v)]
    inputs_before = [t.detach().clone() for t in local]
    o_ring, lse_ring = flashgen.ring_attention(*local, group=group, causal=causal,
                                               return_lse=True)
    grads_ring = torch.autograd.grad(o_ring, local, shard(do))

    assert o_ring.dtype == dtype and o_ring.shape == shard(o).shape
    assert lse_ring.dtype == torch.float32 and not lse_ring.requires_grad
    for before, after in zip(inputs_before, local):
        assert torch.equal(before, after.detach()), "ring_attention wrote into its inputs"
    _assert_ring_close("o", o_ring, shard(o), shard(o_ref), shard(o_naive), dtype)
    _assert_ring_close("lse", lse_ring, shard(lse, 2), shard(lse_ref, 2), shard(lse_naive, 2),
                       dtype)
    for name, grad_ring, grad, grad_ref, grad_naive in zip(("dq", "dk", "dv"), grads_ring, grads,
                                                           grads_ref, grads_naive):
        _assert_ring_close(name, grad_ring, shard(grad), shard(grad_ref), shard(grad_naive),
                           dtype)


def _worker(rank, world, init_file, backend, device_type, dtype) -> None:
    torch.set_num_threads(1)  # world processes share the machine's cores
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device_type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        failures = []
        for causal, shape in CASES:
            try:
                _check_case(rank, world, device, dtype, causal, shape)
            except AssertionError as error:
                failures.append(f"causal={causal} shape={shape}: {error}")
        if world >= SUBGROUP_WORLD + 1:
            # A ring on a subgroup: its ranks 0, 1 are global ranks 1, 2.
            members = list(range(1, SUBGROUP_WORLD + 1))
            subgroup = dist.new_group(members)  # every rank takes part in creating it
            if rank in members:
                causal, shape = CASES[1]
                try:
                    _check_case(members.index(rank), SUBGROUP_WORLD, device, dtype, causal,
                                shape, group=subgroup)
                except AssertionError as error:
                    failures.append(f"subgroup {members}: {error}")
        assert not failures, f"rank {rank} of {world}:\n" + "\n".join(failures)
    finally:
        dist.destroy_process_group()


def _run_ring(tmp_path, world, backend, device_type, dtype) -> None:
    """Runs _worker on `world` processes; a child's exception fails the test
    with its traceback, a hang fails it after TIMEOUT_S."""
    context = mp.start_processes(_worker, args=(world, str(tmp_path / "rendezvous"), backend,
                                                device_type, dtype),
                                 nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(timeout=POLL_S):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.terminate()
            pytest.fail(f"ring of {world} processes did not finish in {TIMEOUT_S} s")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("world", [2, 3])
def test_ring_matches_whole_sequence_on_cpu_gloo(tmp_path, world, dtype):
    _run_ring(tmp_path, world, "gloo", "cpu", dtype)


def _cuda_pair_ready() -> bool:
    return torch.cuda.device_count() >= 2 and flashgen.cuda_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_pair_ready(), reason="needs 2 CUDA GPUs that flashgen can use")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_ring_matches_whole_sequence_on_gpus_nccl(tmp_path, dtype):
    world = min(torch.cuda.device_count(), 4)
    _run_ring(tmp_path, world, "nccl", "cuda", dtype)


@pytest.fixture
def group_of_one(tmp_path):
    """A gloo group holding only this process."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_group_of_one_is_plain_attention(group_of_one, causal):
    q, k, v, do = random_inputs((2, 22, 22, 4, 2, 40, 40), torch.float32, "cpu")
    o, lse = flashgen.attention(q, k, v, causal=causal, return_lse=True)
    grads = torch.autograd.grad(o, (q, k, v), do)
    o_ring, lse_ring = flashgen.ring_attention(q, k, v, causal=causal, return_lse=True)
    grads_ring = torch.autograd.grad(o_ring, (q, k, v), do)
    # One block, no merge: bit for bit what flashgen.attention returns.
    for a, b in zip((o_ring, lse_ring, *grads_ring), (o, lse, *grads)):
        assert torch.equal(a, b)


def test_errors_name_the_argument(group_of_one):
    q, k, v, _ = random_inputs((1, 10, 12, 2, 2, 8, 8), torch.float32, "cpu")
    with pytest.raises(ValueError, match="k holds 12 positions but q holds 10"):
        flashgen.ring_attention(q, k, v)
    q, k, v, _ = random_inputs((1, 9, 9, 2, 2, 8, 8), torch.float32, "cpu")
    with pytest.raises(ValueError, match="local length must be even"):
        flashgen.ring_attention(q, k, v, causal=True)
    with pytest.raises(TypeError, match="dtype"):
        flashgen.ring_attention(q.double(), k.double(), v.double())


def test_uninitialized_group_is_an_error():
    assert not dist.is_initialized()
    q, k, v, _ = random_inputs((1, 4, 4, 2, 2, 8, 8), torch.float32, "cpu")
    with pytest.raises(ValueError, match="torch.distributed is not initialized"):
        flashgen.ring_attention(q, k, v)


def test_shard_and_unshard_torch_tensors():
    x = torch.arange(2 * 24 * 3).reshape(2, 24, 3)  # [batch, seq, channels]
    for causal in (False, True):
        shards = [flashgen.ring_shard(x, r, 3, causal) for r in range(3)]
        assert all(isinstance(s, torch.Tensor) for s in shards)
        assert torch.equal(flashgen.ring_unshard(shards, causal), x)
