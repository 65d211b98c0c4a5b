#!/usr/bin/env python3
"""Ring attention throughput: tokens/s and scaling efficiency across GPUs.

For each world size (number of GPUs, default 1, 2, 4, 8 up to the GPUs
present) the script starts that many processes with torch.multiprocessing
(one per GPU, NCCL, as torchrun would) and, for each sequence length N and
mask, times flashgen.ring_attention on B x N tokens split across the ranks:

  forward   one ring_attention call (inputs require grad, so it is the
            training forward);
  backward  torch.autograd.grad of an output computed beforehand with a fixed
            random dO (the ring backward alone).

World 1 is plain flashgen.attention on one GPU (ring_attention reduces to it)
and is the baseline: efficiency(W) = tokens/s(W) / (W * tokens/s(1)). Where
the baseline does not fit on one GPU, efficiency is relative to the smallest
world that ran that N, and the row says so.

Before timing, each world checks the ring against flashgen.attention on a
short whole sequence (forward and backward). Times are the median over
repeats of the slowest rank (CUDA events on every rank, then an all-reduce
max). What could not run (too few GPUs, N not divisible into 2*W chunks, out
of memory) is printed and kept in the JSON with its reason.

    python3 bench/ring_bench.py                                # H200 defaults
    python3 bench/ring_bench.py --seqs 131072,262144 --worlds 1,2 --json out.json
    python3 bench/ring_bench.py --device cpu --seqs 512 --worlds 1,2   # smoke test (gloo)
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:  # --help works without PyTorch
    torch = None

# The backward does 2.5x the forward's matmul work (FlashAttention convention).
BACKWARD_FLOP_RATIO = 2.5
DEFAULT_SEQS = (131072, 262144, 524288, 1048576)
DEFAULT_WORLDS = (1, 2, 4, 8)
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Validation: positions per causal chunk of the short check, and the allowed
# error relative to the largest magnitude of each reference output.
CHECK_CHUNK = {"cuda": 512, "cpu": 16}
CHECK_TOLERANCE = {"bf16": 3e-2, "fp16": 4e-3, "fp32": 1e-4}
COLLECTIVE_TIMEOUT_S = 1800
# Fraction of the free GPU memory a run may plan to use (the allocator's
# fragmentation and the kernels' scratch take the rest).
MEMORY_HEADROOM = 0.85
CPU_DEFAULT_WORLDS = (1, 2)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqs", default=",".join(map(str, DEFAULT_SEQS)),
                        help="total sequence lengths N, comma-separated")
    parser.add_argument("--worlds", default=None,
                        help="world sizes (default 1,2,4,8 up to the GPUs present)")
    parser.add_argument("--masks", default="full,causal", help="full, causal or both")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=16, help="query heads")
    parser.add_argument("--heads-kv", type=int, default=None, help="key/value heads (GQA)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--skip-backward", action="store_true")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu runs gloo on the CPU backend: a smoke test for small N")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    args.seqs = [int(s) for s in args.seqs.split(",")]
    args.masks = [m for m in args.masks.split(",")]
    for mask in args.masks:
        if mask not in ("full", "causal"):
            parser.error(f"--masks: {mask!r} is neither full nor causal")
    args.heads_kv = args.heads_kv or args.heads
    if args.worlds is not None:
        args.worlds = [int(w) for w in args.worlds.split(",")]
    return args


def forward_flops(batch, heads, seq, dim, causal) -> float:
    """FlashAttention convention: 4·B·H·N²·D, causal counts the N(N+1)/2 visible pairs."""
    pairs = seq * (seq + 1) / 2 if causal else seq * seq
    return 4.0 * batch * heads * pairs * dim


# ---------------------------------------------------------------------------
# One rank.
# ---------------------------------------------------------------------------

def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeats, warmup):
    """Median seconds of fn() over repeats, the slowest rank each time."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        dist.barrier()
        _sync(device)
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            seconds = begin.elapsed_time(end) / 1e3
        else:
            start = time.perf_counter()
            fn()
            seconds = time.perf_counter() - start
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        times.append(slowest.item())
    return statistics.median(times)


def _random_local(args, seq_local, device, dtype, seed):
    generator = torch.Generator(device=device).manual_seed(seed)

    def make(heads, dim):
        return torch.randn((args.batch, seq_local, heads, dim), generator=generator,
                           device=device, dtype=dtype)

    return (make(args.heads, args.dim), make(args.heads_kv, args.dim),
            make(args.heads_kv, args.dim), make(args.heads, args.dim))


def _validate(args, rank, world, device, dtype, causal):
    """Max error of the ring against flashgen.attention on a short whole
    sequence, relative to each output's largest magnitude."""
    import flashgen

    seq = 2 * world * CHECK_CHUNK[device.type]
    # The same whole sequence on every rank: one seed, drawn on the CPU.
    q, k, v, do = (t.to(device) for t in _random_local(args, seq, torch.device("cpu"),
                                                           dtype, seed=1))
    whole = [t.clone().requires_grad_() for t in (q, k, v)]
    o = flashgen.attention(*whole, causal=causal)
    expected = [o, *torch.autograd.grad(o, whole, do)]
    local = [flashgen.ring_shard(t, rank, world, causal).clone().requires_grad_()
             for t in (q, k, v)]
    o_ring = flashgen.ring_attention(*local, causal=causal)
    got = [o_ring, *torch.autograd.grad(o_ring, local,
                                        flashgen.ring_shard(do, rank, world, causal))]
    worst = 0.0
    for ring_out, whole_out in zip(got, expected):
        reference = flashgen.ring_shard(whole_out, rank, world, causal).float()
        scale = max(reference.abs().max().item(), 1.0)
        worst = max(worst, (ring_out.float() - reference).abs().max().item() / scale)
    worst_all = torch.tensor([worst], dtype=torch.float64, device=device)
    dist.all_reduce(worst_all, op=dist.ReduceOp.MAX)
    return worst_all.item()


def bytes_needed(args, seq_local: int, world: int, element_bytes: int) -> int:
    """Memory one rank needs for the timed forward + backward (an estimate
    from ring.py's buffers; the kernels' own scratch is small beside it)."""
    rows_q = args.batch * seq_local * args.heads * args.dim      # q, o, do, dq
    rows_kv = args.batch * seq_local * args.heads_kv * args.dim  # k, v, dk, dv
    fp32 = 4
    inputs = element_bytes * (3 * rows_q + 2 * rows_kv)          # q, do, o; k, v
    grads = element_bytes * (rows_q + 2 * rows_kv)
    if world == 1:  # plain attention
        return inputs + 2 * grads  # the grads and their copies in autograd
    kv_buffers = element_bytes * 2 * 2 * rows_kv                 # double-buffered k, v
    forward = fp32 * 4 * rows_q                                  # o sum + merge temporaries
    backward = fp32 * (rows_q + 2 * 2 * rows_kv) + 2 * grads     # dq sum, dk/dv sums, blocks
    return inputs + kv_buffers + forward + (0 if args.skip_backward else backward)


def _fits(args, seq, world, device, dtype) -> str:
    """'' when every rank has room for the problem, else the reason."""
    if device.type != "cuda":
        return ""
    need = bytes_needed(args, seq // world, world, torch.finfo(dtype).bits // 8)
    free = torch.tensor([float(torch.cuda.mem_get_info(device)[0])], device=device)
    dist.all_reduce(free, op=dist.ReduceOp.MIN)
    gib = 1024 ** 3
    if need > MEMORY_HEADROOM * free.item():
        return f"needs about {need / gib:.0f} GiB per GPU, {free.item() / gib:.0f} GiB free"
    return ""


def _measure(args, rank, world, device, dtype, seq, causal):
    """One row: forward (and backward) time of ring attention on seq tokens."""
    import flashgen

    row = {"seq": seq, "world": world, "causal": causal, "seq_local": seq // world}
    chunks = 2 * world if causal else world
    if seq % chunks != 0:
        row["error"] = f"N = {seq} does not split into {chunks} equal chunks"
        return row
    # Decided on every rank alike: a rank that ran out of memory inside the
    # ring would leave its peers waiting on transfers that never come.
    too_big = _fits(args, seq, world, device, dtype)
    if too_big:
        row["error"] = too_big
        return row
    try:
        q, k, v, do = _random_local(args, seq // world, device, dtype, seed=rank)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        row["fwd_s"] = _timed(lambda: flashgen.ring_attention(q, k, v, causal=causal), device,
                              args.repeats, args.warmup)
        if not args.skip_backward:
            o = flashgen.ring_attention(q, k, v, causal=causal)
            row["bwd_s"] = _timed(lambda: torch.autograd.grad(o, (q, k, v), do,
                                                              retain_graph=True),
                                  device, args.repeats, args.warmup)
    except torch.cuda.OutOfMemoryError as error:
        row["error"] = f"out of memory: {str(error).splitlines()[0]}"
    # Every rank must agree that the row ran, or the next collective hangs.
    ok = torch.tensor([0.0 if "error" in row else 1.0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if ok.item() == 0.0 and "error" not in row:
        row = {key: row[key] for key in ("seq", "world", "causal", "seq_local")}
        row["error"] = "out of memory on another rank"
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def _worker(rank, world, args, init_file, out_file):
    device = torch.device("cuda", rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world,
                            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    dtype = getattr(torch, DTYPES[args.dtype])
    rows, checks = [], {}
    try:
        for mask in args.masks:
            causal = mask == "causal"
            checks[mask] = _validate(args, rank, world, device, dtype, causal)
            if checks[mask] > CHECK_TOLERANCE[args.dtype]:
                rows += [{"seq": s, "world": world, "causal": causal,
                          "error": f"validation failed: relative error {checks[mask]:.3g}"}
                         for s in args.seqs]
                continue
            for seq in args.seqs:
                rows.append(_measure(args, rank, world, device, dtype, seq, causal))
                if rank == 0:
                    print(f"  world {world} {mask} N={seq}: {_progress(rows[-1])}",
                          file=sys.stderr, flush=True)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump({"rows": rows, "validation": checks}, f)


def _progress(row) -> str:
    if "error" in row:
        return row["error"]
    text = f"fwd {row['fwd_s'] * 1e3:.1f} ms"
    return text + (f", bwd {row['bwd_s'] * 1e3:.1f} ms" if "bwd_s" in row else "")


# ---------------------------------------------------------------------------
# Driver: one process group per world size, then the table.
# ---------------------------------------------------------------------------

def _available(args) -> int:
    if args.device == "cpu":
        return os.cpu_count() or 1  # gloo processes; meant for tiny N
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _run_world(args, world):
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "rows.json")
        mp.start_processes(_worker, args=(world, args, os.path.join(tmp, "rendezvous"),
                                          out_file),
                           nprocs=world, join=True, start_method="spawn")
        with open(out_file) as f:
            return json.load(f)


def _add_rates(args, rows):
    """tokens/s, TFLOP/s per GPU and efficiency against the smallest world."""
    for row in rows:
        flops = forward_flops(args.batch, args.heads, row["seq"], args.dim, row["causal"])
        for kind, ratio in (("fwd", 1.0), ("bwd", BACKWARD_FLOP_RATIO)):
            if f"{kind}_s" in row:
                seconds = row[f"{kind}_s"]
                row[f"{kind}_tokens_per_s"] = args.batch * row["seq"] / seconds
                row[f"{kind}_tflops_per_gpu"] = ratio * flops / seconds / row["world"] / 1e12
    by_problem = {}
    for row in rows:
        if "fwd_s" in row:
            by_problem.setdefault((row["seq"], row["causal"]), []).append(row)
    for group in by_problem.values():
        base = min(group, key=lambda r: r["world"])
        for row in group:
            row["efficiency_base_world"] = base["world"]
            for kind in ("fwd", "bwd"):
                key = f"{kind}_tokens_per_s"
                if key in row and key in base:
                    per_gpu = row[key] / row["world"]
                    row[f"{kind}_efficiency"] = per_gpu / (base[key] / base["world"])


def _header(args) -> dict:
    import flashgen

    info = {"tool": "ring_bench", "date": datetime.date.today().isoformat(),
            "torch": torch.__version__, "flashgen": flashgen.version(), "device": args.device,
            "shape": {"batch": args.batch, "heads": args.heads, "heads_kv": args.heads_kv,
                      "dim": args.dim, "dtype": args.dtype}}
    if args.device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = torch.cuda.device_count()
        info["cuda"] = torch.version.cuda
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    return info


def _print_table(info, rows, skipped):
    where = (f"{info['gpu']} x{info['gpus']}  cuda {info['cuda']}  nccl {info['nccl']}"
             if "gpu" in info else "cpu (gloo)")
    print(f"# ring_bench {info['date']}  {where}  torch {info['torch']}  "
          f"flashgen {info['flashgen']}")
    shape = info["shape"]
    print(f"# B={shape['batch']} Hq={shape['heads']} Hkv={shape['heads_kv']} "
          f"D={shape['dim']} {shape['dtype']}; efficiency = tokens/s per GPU vs the base world")
    print(f"{'mask':6} {'N':>8} {'W':>2} {'fwd ms':>10} {'fwd tok/s':>11} {'TF/GPU':>7} "
          f"{'eff':>5} {'bwd ms':>10} {'bwd tok/s':>11} {'TF/GPU':>7} {'eff':>5} {'base':>4}")
    for row in sorted(rows, key=lambda r: (r["causal"], r["seq"], r["world"])):
        mask = "causal" if row["causal"] else "full"
        lead = f"{mask:6} {row['seq']:8d} {row['world']:2d}"
        if "error" in row:
            print(f"{lead} not run: {row['error']}")
            continue
        cells = []
        for kind in ("fwd", "bwd"):
            if f"{kind}_s" not in row:
                cells.append(f"{'-':>10} {'-':>11} {'-':>7} {'-':>5}")
                continue
            cells.append(f"{row[f'{kind}_s'] * 1e3:10.1f} {row[f'{kind}_tokens_per_s']:11.4g} "
                         f"{row[f'{kind}_tflops_per_gpu']:7.1f} "
                         f"{row.get(f'{kind}_efficiency', float('nan')):5.2f}")
        print(f"{lead} {' '.join(cells)} {row['efficiency_base_world']:4d}")
    for reason in skipped:
        print(f"not run: {reason}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if torch is None:
        print("ring_bench needs PyTorch", file=sys.stderr)
        return 1
    available = _available(args)
    defaults = CPU_DEFAULT_WORLDS if args.device == "cpu" else DEFAULT_WORLDS
    worlds = args.worlds or [w for w in defaults if w <= max(available, 1)]
    skipped = []
    if args.device == "cuda" and available == 0:
        print("ring_bench: no CUDA GPU here; --device cpu runs a small gloo smoke test",
              file=sys.stderr)
        return 1
    rows = []
    for world in worlds:
        if world > available:
            skipped.append(f"world {world}: needs {world} GPUs, {available} present")
            continue
        print(f"world {world}: starting {world} process(es)", file=sys.stderr, flush=True)
        result = _run_world(args, world)
        rows += result["rows"]
        for mask, error in result["validation"].items():
            print(f"world {world} {mask}: ring vs whole-sequence attention, relative error "
                  f"{error:.2e}", file=sys.stderr)
    if 1 not in worlds or any("error" in r for r in rows if r["world"] == 1):
        skipped.append("no one-GPU baseline for some N: efficiency is against the smallest "
                       "world that ran (column 'base')")
    _add_rates(args, rows)
    info = _header(args)
    _print_table(info, rows, skipped)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "rows": rows, "not_run": skipped}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
