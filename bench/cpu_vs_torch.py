#!/usr/bin/env python3
"""flashgen's CPU backend against torch's CPU scaled_dot_product_attention.

Both run in this process on the same CPU tensors ([batch, heads, seq, dim],
non-causal, random non-zero data), forward and backward, with the same thread
count (torch.set_num_threads; flashgen follows torch.get_num_threads()).
Each configuration is validated first (flashgen's outputs against torch's),
then timed: warm-up, then the median of repeats, the two systems' calls
interleaved so that both see the same load on a shared machine. The backward
is timed alone, as torch.autograd.grad of a retained graph for both systems.
Each call starts after a pause (--settle-ms, not timed): torch's OpenMP
workers spin-wait for several ms after each of its operators (libgomp's
GOMP_SPINCOUNT; longer where the CPU's pause instruction is slow), and a
flashgen call started right after a torch call shares its cores with them
(2-core EPYC, 2 threads, bf16 D=64 forward: 27 ms alone or after a 10 ms
pause, 32-37 ms right after torch). --settle-ms 0 times them back to back.

    python3 bench/cpu_vs_torch.py --out bench/results/<machine>/cpu_vs_torch_<date>.json

Needs the built library (build/libflashgen.so, or $FLASHGEN_LIBRARY), numpy
and torch. FLOPs: forward 4·B·H·N²·D, backward 2.5× that.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import flashgen  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# Largest |flashgen - torch| allowed, relative to max |torch|: both compute in
# fp32 from the same inputs, so they differ by rounding only (bf16 outputs
# by about one bf16 ulp, 2^-8 relative).
AGREEMENT = {"f32": 1e-4, "bf16": 3e-2}


def cpu_name() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_kernels() -> str | None:
    """The CPU backend's instruction set ("amx", "avx512", ...), as
    `flashgen info --json` beside the loaded library says; None without it."""
    import subprocess
    from flashgen import _library
    command = pathlib.Path(_library.find_library()).parent / "flashgen"
    try:
        run = subprocess.run([str(command), "info", "--json"], capture_output=True, text=True,
                             timeout=60)
        return json.loads(run.stdout).get("cpu_isa")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def median_seconds(fns, warmup: int, repeats: int, settle: float) -> list:
    """Median seconds of each function, the calls interleaved (a, b, a, b, ...)
    so that both systems see the same machine load, each call `settle`
    seconds after the last one ended."""
    for _ in range(warmup):
        for fn in fns:
            time.sleep(settle)
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, seconds in zip(fns, times):
            time.sleep(settle)
            start = time.perf_counter()
            fn()
            seconds.append(time.perf_counter() - start)
    return [statistics.median(seconds) for seconds in times]


def inputs(dtype, batch, heads, seq, dim, seed):
    generator = torch.Generator().manual_seed(seed)

    def tensor():
        # Uniform in [-1, 1): random, non-zero, the same for both systems.
        return (torch.rand(batch, heads, seq, dim, generator=generator) * 2 - 1).to(dtype)

    return tensor(), tensor(), tensor(), tensor()


def attention_torch(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def attention_flashgen(q, k, v):
    return flashgen.attention(q, k, v, layout="bhsd")


def check_agreement(name, dtype_name, q, k, v, grad_o):
    results = []
    for fn in (attention_torch, attention_flashgen):
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        out = fn(*leaves)
        grads = torch.autograd.grad(out, leaves, grad_o)
        results.append([out.float(), *(g.float() for g in grads)])
    for label, ref, got in zip(("o", "dq", "dk", "dv"), *results):
        scale = ref.abs().max().item()
        error = (ref - got).abs().max().item()
        if not error <= AGREEMENT[dtype_name] * max(scale, 1e-30):
            raise SystemExit(f"{name}: flashgen's {label} differs from torch's by {error:g} "
                             f"(max |torch| = {scale:g})")


def time_systems(fns, q, k, v, grad_o, warmup, repeats, settle):
    """[(forward seconds, backward seconds)] per system, medians."""
    with torch.no_grad():
        forward = median_seconds([lambda fn=fn: fn(q, k, v) for fn in fns], warmup, repeats,
                                 settle)
    calls = []
    for fn in fns:
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        out = fn(*leaves)
        calls.append(lambda out=out, leaves=leaves:
                     torch.autograd.grad(out, leaves, grad_o, retain_graph=True))
    backward = median_seconds(calls, warmup, repeats, settle)
    return list(zip(forward, backward))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, help="JSON file to write")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for both systems (default: torch's own default, "
                             "torch.get_num_threads())")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=2048, help="N (smaller for a quick run)")
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 128, 256, 127])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["f32", "bf16"])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settle-ms", type=float, default=100.0,
                        help="untimed pause before each call, so that no call shares the CPU "
                             "with the other system's spinning idle threads (0: back to back)")
    args = parser.parse_args(argv)

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    batch, heads, seq = args.batch, args.heads, args.seq
    rows = []
    print(f"{'system':9} {'dtype':5} {'D':>4} {'threads':>7} {'fwd ms':>9} {'bwd ms':>9} "
          f"{'fwd TF/s':>8} {'bwd TF/s':>8}")
    for dtype_name in args.dtypes:
        for dim in args.dims:
            q, k, v, grad_o = inputs(DTYPES[dtype_name], batch, heads, seq, dim, seed=dim)
            name = f"{dtype_name} D={dim}"
            check_agreement(name, dtype_name, q, k, v, grad_o)
            forward_flops = 4.0 * batch * heads * seq * seq * dim
            systems = (("flashgen", attention_flashgen), ("torch", attention_torch))
            timings = time_systems([fn for _, fn in systems], q, k, v, grad_o, args.warmup,
                                   args.repeats, args.settle_ms / 1e3)
            for (system, _), (fwd, bwd) in zip(systems, timings):
                row = {"system": system, "dtype": dtype_name, "D": dim, "threads": threads,
                       "fwd_tflops": forward_flops / fwd / 1e12,
                       "bwd_tflops": 2.5 * forward_flops / bwd / 1e12,
                       "fwd_ms": fwd * 1e3, "bwd_ms": bwd * 1e3}
                rows.append(row)
                print(f"{system:9} {dtype_name:5} {dim:4d} {threads:7d} {fwd * 1e3:9.2f} "
                      f"{bwd * 1e3:9.2f} {row['fwd_tflops']:8.3f} {row['bwd_tflops']:8.3f}",
                      flush=True)

    result = {
        "cpu": cpu_name(),
        "cpu_kernels": cpu_kernels(),
        "threads": threads,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "shape": {"B": batch, "H": heads, "N": seq, "causal": False},
        "warmup": args.warmup,
        "repeats": args.repeats,
        "settle_ms": args.settle_ms,
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
