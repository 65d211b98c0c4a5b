#!/usr/bin/env python3
"""Where a small call's host time goes, layer by layer.

On a problem whose kernels take a few microseconds, a call's wall time is
host time. This times, per call (wall µs, the GPU drained before and after):
the whole `flashgen.attention` forward and forward + backward as a model
calls them, SDPA's the same way, the C API alone (views and options built
once: what is left is the library's validation, planning and launch), and
the kernels' GPU time (a CUDA graph of the same call, replayed). Then the
Python functions that cost the most (cProfile, per call).

    python3 bench/host_overhead.py [--shape B,S,Hq,Hkv,D] [--causal] [--json PATH]

Needs a CUDA GPU, torch and the built library ($FLASHGEN_LIBRARY).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pathlib
import pstats
import sys

import torch
import torch.nn.functional as F

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "python"))
sys.path.insert(0, str(BENCH_DIR))
import flashgen  # noqa: E402
from peers import wall_us as peers_wall_us  # noqa: E402
from flashgen import _capi  # noqa: E402
from flashgen._torch_views import options_for, row_stats_view, tensor_view  # noqa: E402


def wall_us(call, calls):
    """Wall µs per call, after ten untimed calls (bench/peers.py)."""
    return peers_wall_us(call, calls, warmup=10)


def graph_us(call, calls):
    """GPU µs per call: the call captured once in a CUDA graph, replayed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return wall_us(graph.replay, calls)


def profile_top(call, calls, lines):
    """cProfile's most expensive functions (own time) over calls of call()."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(lines)
    return text.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="1,128,8,8,64", help="B,S,Hq,Hkv,D (default 1,128,8,8,64)")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile-lines", type=int, default=25)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    batch, seq, heads_q, heads_kv, dim = (int(x) for x in args.shape.split(","))
    dtype = torch.bfloat16

    def tensor(heads, requires_grad=False):
        return torch.randn(batch, seq, heads, dim, device="cuda", dtype=dtype,
                           requires_grad=requires_grad)

    q, k, v = tensor(heads_q), tensor(heads_kv), tensor(heads_kv)
    gq, gk, gv = tensor(heads_q, True), tensor(heads_kv, True), tensor(heads_kv, True)
    grad_out = torch.randn_like(q)
    causal = args.causal

    def fg_forward():
        flashgen.attention(q, k, v, causal=causal)

    def fg_step():
        o = flashgen.attention(gq, gk, gv, causal=causal)
        torch.autograd.grad(o, (gq, gk, gv), grad_out)

    def sdpa(qq, kk, vv):
        return F.scaled_dot_product_attention(qq.transpose(1, 2), kk.transpose(1, 2),
                                              vv.transpose(1, 2), is_causal=causal,
                                              enable_gqa=heads_q != heads_kv).transpose(1, 2)

    def sdpa_forward():
        sdpa(q, k, v)

    def sdpa_step():
        o = sdpa(gq, gk, gv)
        torch.autograd.grad(o, (gq, gk, gv), grad_out)

    # The C API alone: views, options and outputs made once.
    o = torch.empty_like(q)
    lse = torch.empty(batch, heads_q, seq, device="cuda", dtype=torch.float32)
    views = [tensor_view(t) for t in (q, k, v, o)]
    lse_view = row_stats_view(lse)
    options = options_for(q.device, causal=causal, scale=None, deterministic=True)

    def capi_forward():
        _capi.forward(*views, lse_view, options)

    figures = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "flashgen": flashgen.version(), "shape": args.shape, "causal": causal,
        "flashgen_forward_wall_us": wall_us(fg_forward, args.calls),
        "sdpa_forward_wall_us": wall_us(sdpa_forward, args.calls),
        "capi_forward_wall_us": wall_us(capi_forward, args.calls),
        "flashgen_forward_gpu_us": graph_us(fg_forward, args.calls),
        "sdpa_forward_gpu_us": graph_us(sdpa_forward, args.calls),
        "flashgen_step_wall_us": wall_us(fg_step, args.calls // 2),
        "sdpa_step_wall_us": wall_us(sdpa_step, args.calls // 2),
    }
    for name, value in figures.items():
        print(f"{name:28} {value:.1f}" if isinstance(value, float) else f"{name:28} {value}")
    print("\n== forward, cProfile, own time")
    print(profile_top(fg_forward, args.calls, args.profile_lines))
    print("== forward + backward, cProfile, own time")
    print(profile_top(fg_step, args.calls // 2, args.profile_lines))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
