#!/usr/bin/env python3
"""Times PyTorch's attention kernels on the shapes of `flashgen bench`.

Peers: scaled_dot_product_attention forced to one backend at a time through
torch.nn.attention.sdpa_kernel (FLASH = FlashAttention-2, CUDNN, EFFICIENT =
memory-efficient / xformers kernel) and FlexAttention (torch.compile'd once per
shape; the compile is kept out of the timing and reported as "compile_s").

What is timed, per (backend, D):
  forward   one attention call with inputs that require grad, i.e. the
            training forward that also writes the log-sum-exp (the same work
            flashgen's forward does);
  backward  the backward alone: torch.autograd.grad of an output computed
            beforehand, with a fixed random dO and retain_graph=True, so each
            repeat runs the backward kernels only (dQ, dK, dV).
Each repeat is bracketed by its own pair of CUDA events; the median is
reported. Inputs are random normal and rotate over enough input sets to
exceed twice the L2 cache, so no repeat reads its operands from L2.

Writes JSON: {"tool": "peers", "device", "torch", "cudnn", "date",
"gemm_tflops", "rows": [...]}, one row per (backend, D) with fwd/bwd ms,
TFLOP/s and GINSTRS, or with "error" when the backend refuses the shape
("bwd_error" when only the backward fails). Progress goes to stderr.

Runs on a CUDA machine with PyTorch; without PyTorch only --help and the
pure helpers (sweep_dims, forward_flops, ...) work.
"""

import argparse
import datetime
import gc
import json
import math
import statistics
import sys
import time

try:
    import torch
except ImportError:  # --help and the pure helpers must work without PyTorch
    torch = None

BACKENDS = ("flash", "cudnn", "efficient", "flex")
DTYPE_NAMES = ("bf16", "fp16", "f32")

# The backward does 2.5x the forward's matmul work (FlashAttention convention:
# dV, dP, dS->dQ, dS->dK plus the recomputed S), whatever the kernel does.
BACKWARD_FLOP_RATIO = 2.5
# Causal attention computes about half of the N x N score matrix.
CAUSAL_FRACTION = 0.5

# The GEMM ceiling: one square bf16 matmul, large enough to saturate the GPU.
GEMM_SIZE = 8192
GEMM_REPEATS = 20
GEMM_WARMUP = 5

# H200 L2 is 50 MiB; used only when PyTorch does not report the size.
FALLBACK_L2_BYTES = 50 * 1024 * 1024
# Inputs rotate over enough sets to cover this many L2 capacities.
L2_COVERAGE = 2
MIN_INPUT_SETS = 2
MAX_INPUT_SETS = 64

# Slow backends (EFFICIENT backward at D >= 256 takes ~0.25 s a call) get
# fewer repeats: warm-up and timing stop once they have used this much time.
DEFAULT_TIME_BUDGET_S = 1.0
MIN_REPEATS = 3

ERROR_MESSAGE_CHARS = 200


# ----------------------------------------------------------------------------
# Pure helpers (no PyTorch)
# ----------------------------------------------------------------------------

def sweep_dims():
    """The head-dimension sweep shared with `flashgen bench --sweep`."""
    dims = set(range(4, 96 + 1, 4))
    dims |= set(range(104, 160 + 1, 8))
    dims |= set(range(176, 256 + 1, 16))
    dims |= set(range(288, 384 + 1, 32))
    # Odd and just-past-a-limit sizes: unaligned rows, one past 256 and 384.
    dims |= {127, 199, 257, 385, 448, 512}
    return sorted(dims)


def parse_int_list(text, what):
    """'64,128' -> [64, 128]; positive integers only."""
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) <= 0:
            raise ValueError(f"{what}: '{part}' is not a positive integer")
        values.append(int(part))
    if not values:
        raise ValueError(f"{what}: empty list")
    return values


def parse_backends(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in BACKENDS:
            raise ValueError(f"--backends: '{name}' is not one of {','.join(BACKENDS)}")
    if not names:
        raise ValueError("--backends: empty list")
    return names


def forward_flops(batch, heads, seq, dim, causal):
    """4*B*H*N^2*D: S = Q*K^T and O = P*V, 2 FLOPs per multiply-add."""
    flops = 4.0 * batch * heads * seq * seq * dim
    return flops * CAUSAL_FRACTION if causal else flops


def backward_flops(batch, heads, seq, dim, causal):
    return BACKWARD_FLOP_RATIO * forward_flops(batch, heads, seq, dim, causal)


# GINSTRS counts every score of the N x N matrix, causal or not, as the
# published peer sweep does (only FLOPs are halved for causal).
def forward_instructions(batch, heads, seq, dim, causal):
    """(2D+5)*N^2 per head: the seed benchmark's instruction count."""
    return float(2 * dim + 5) * seq * seq * batch * heads


def backward_instructions(batch, heads, seq, dim, causal):
    """(3D+5)*N^2 for the query pass plus (4D+5)*N^2 for the key/value pass."""
    return float((3 * dim + 5) + (4 * dim + 5)) * seq * seq * batch * heads


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def ginstrs(instructions, ms):
    return instructions / (ms * 1e-3) / 1e9


def input_sets_needed(bytes_per_set, l2_bytes):
    """How many input sets to rotate so that L2 never still holds the next."""
    wanted = math.ceil(L2_COVERAGE * l2_bytes / max(bytes_per_set, 1))
    return max(MIN_INPUT_SETS, min(MAX_INPUT_SETS, wanted))


def one_line_error(exc):
    """'<ExceptionType>: first line of message', shortened."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:ERROR_MESSAGE_CHARS]


def shape_fields(backend, dim, args):
    return {"backend": backend, "D": dim, "N": args.seq, "B": args.batch,
            "H": args.heads, "causal": args.causal, "dtype": args.dtype}


def timing_fields(direction, ms, dim, args):
    """fwd_/bwd_ ms, TFLOP/s and GINSTRS for one measured direction."""
    shape = (args.batch, args.heads, args.seq, dim, args.causal)
    if direction == "fwd":
        flops, instrs = forward_flops(*shape), forward_instructions(*shape)
    else:
        flops, instrs = backward_flops(*shape), backward_instructions(*shape)
    return {f"{direction}_ms": ms,
            f"{direction}_tflops": tflops(flops, ms),
            f"{direction}_ginstrs": ginstrs(instrs, ms)}


def progress_line(index, total, dim, backend, row):
    head = f"[{index}/{total}] D={dim} {backend}"
    if "error" in row:
        return f"{head} refused: {row['error']}"
    text = f"{head} fwd {row['fwd_ms']:.3f} ms ({row['fwd_tflops']:.0f} TFLOP/s)"
    if "bwd_error" in row:
        return f"{text} bwd refused: {row['bwd_error']}"
    return f"{text} bwd {row['bwd_ms']:.3f} ms ({row['bwd_tflops']:.0f} TFLOP/s)"


# ----------------------------------------------------------------------------
# Timing (PyTorch + CUDA)
# ----------------------------------------------------------------------------

def torch_dtype(name):
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "f32": torch.float32}[name]


def wall_us(call, calls, warmup=1):
    """Wall µs per call of call() repeated (host time where the GPU work is
    small), the GPU drained before and after; warmup untimed calls first."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / calls * 1e6


def time_calls(call, count, warmup, repeats, budget_s):
    """Median ms of call(i) over repeats, i rotating over count input sets.

    The first call is always made untimed (lazy init, kernel selection).
    Warm-up stops after half of budget_s; timing stops once budget_s of wall
    time is spent, but times at least MIN_REPEATS calls.
    """
    call(0)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for i in range(1, warmup):
        call(i % count)
        torch.cuda.synchronize()
        if time.perf_counter() - started > budget_s / 2:
            break
    times = []
    started = time.perf_counter()
    while len(times) < repeats:
        batch = min(MIN_REPEATS, repeats)
        if times:
            elapsed_s = time.perf_counter() - started
            per_call_s = max(elapsed_s / len(times), 1e-9)
            affordable = repeats if math.isinf(budget_s) else int((budget_s - elapsed_s) / per_call_s)
            batch = min(repeats - len(times), affordable)
            if batch <= 0:
                break
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(batch)]
        for offset, (start, end) in enumerate(events):
            start.record()
            call((len(times) + offset) % count)
            end.record()
        torch.cuda.synchronize()
        times.extend(start.elapsed_time(end) for start, end in events)
    return statistics.median(times)


def make_inputs(dim, args):
    """Input sets, each {q, k, v, grad_out}: [B, H, N, D], random normal."""
    dtype = torch_dtype(args.dtype)
    element_bytes = torch.finfo(dtype).bits // 8
    tensor_bytes = args.batch * args.heads * args.seq * dim * element_bytes
    l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or FALLBACK_L2_BYTES
    count = input_sets_needed(4 * tensor_bytes, l2_bytes)
    shape = (args.batch, args.heads, args.seq, dim)
    sets = []
    for _ in range(count):
        q, k, v = (torch.randn(shape, device="cuda", dtype=dtype).requires_grad_() for _ in range(3))
        sets.append({"q": q, "k": k, "v": v,
                     "grad_out": torch.randn(shape, device="cuda", dtype=dtype)})
    return sets


def sdpa_attention(backend, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def attention(q, k, v):
        # The backward kernel is fixed by the autograd node the forward records,
        # so forcing the backend around the forward forces it for both.
        with sdpa_kernel([which]):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
    return attention


def flex_attention_for(seq, causal):
    """A freshly compiled flex_attention (one compile per shape)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    # A fresh compile per shape: otherwise the recompile limit would silently
    # send later head dimensions to the unfused eager fallback.
    torch._dynamo.reset()
    # The backward is timed by replaying autograd.grad with retain_graph=True,
    # which a compiled graph with donated buffers refuses ("non-empty donated
    # buffers requires ... retain_graph=False"): keep the buffers.
    try:
        torch._functorch.config.donated_buffer = False
    except AttributeError:  # older PyTorch: no donated buffers at all
        pass
    compiled = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if causal:
        def causal_mask(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx
        block_mask = create_block_mask(causal_mask, B=None, H=None, Q_LEN=seq, KV_LEN=seq, device="cuda")

    def attention(q, k, v):
        return compiled(q, k, v, block_mask=block_mask)
    return attention


def measure_backend(backend, dim, args):
    """One row: fwd/bwd timings, or the error that refused the shape."""
    row = shape_fields(backend, dim, args)
    sets = None
    try:
        sets = make_inputs(dim, args)
        attention = prepare_attention(backend, sets[0], row, args)

        def forward(i):
            s = sets[i]
            attention(s["q"], s["k"], s["v"])
        ms = time_calls(forward, len(sets), args.warmup, args.repeats, args.time_budget_s)
        row.update(timing_fields("fwd", ms, dim, args))
    except Exception as exc:  # refused shape, OOM, compile failure: record and go on
        row["error"] = one_line_error(exc)
    if "error" in row:
        # Outside the except clause: the traceback (and the tensors its frames
        # hold) is gone, so release() can hand the memory back.
        sets = None
        release()
        return row

    outputs = None
    try:
        # Outputs computed once per set; each repeat runs only the backward.
        outputs = [attention(s["q"], s["k"], s["v"]) for s in sets]

        def backward(i):
            s = sets[i]
            torch.autograd.grad(outputs[i], (s["q"], s["k"], s["v"]), s["grad_out"],
                                retain_graph=True)
        ms = time_calls(backward, len(sets), args.warmup, args.repeats, args.time_budget_s)
        row.update(timing_fields("bwd", ms, dim, args))
    except Exception as exc:
        row["bwd_error"] = one_line_error(exc)
    outputs, sets = None, None
    release()
    return row


def prepare_attention(backend, first_set, row, args):
    """The attention callable for backend, checked once on first_set.

    FlexAttention is compiled here (forward and backward) and its compile
    time stored in row["compile_s"], outside any timing.
    """
    q, k, v = first_set["q"], first_set["k"], first_set["v"]
    if backend == "flex":
        started = time.perf_counter()
        attention = flex_attention_for(args.seq, args.causal)
        out = attention(q, k, v)
        torch.autograd.grad(out, (q, k, v), first_set["grad_out"])
        torch.cuda.synchronize()
        row["compile_s"] = time.perf_counter() - started
    else:
        attention = sdpa_attention(backend, args.causal)
    out = attention(q, k, v)
    if not bool(torch.isfinite(out).all()):
        raise FloatingPointError("forward output has non-finite values")
    return attention


def release():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def measure_gemm_tflops():
    """Median TFLOP/s of an 8192^3 bf16 matmul on random data."""
    shape = (GEMM_SIZE, GEMM_SIZE)
    pairs = [(torch.randn(shape, device="cuda", dtype=torch.bfloat16),
              torch.randn(shape, device="cuda", dtype=torch.bfloat16)) for _ in range(MIN_INPUT_SETS)]

    def matmul(i):
        torch.matmul(*pairs[i])
    ms = time_calls(matmul, len(pairs), GEMM_WARMUP, GEMM_REPEATS, budget_s=float("inf"))
    del pairs
    release()
    return tflops(2.0 * GEMM_SIZE ** 3, ms)


def run(args):
    dims = sweep_dims() if args.sweep else parse_int_list(args.dims, "--dims")
    backends = parse_backends(args.backends)
    result = {"tool": "peers",
              "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(),
              "date": datetime.date.today().isoformat()}
    if not args.skip_gemm:
        result["gemm_tflops"] = measure_gemm_tflops()
        print(f"bf16 GEMM {GEMM_SIZE}^3: {result['gemm_tflops']:.0f} TFLOP/s", file=sys.stderr, flush=True)
    result["rows"] = []
    for index, dim in enumerate(dims, start=1):
        for backend in backends:
            row = measure_backend(backend, dim, args)
            result["rows"].append(row)
            print(progress_line(index, len(dims), dim, backend, row), file=sys.stderr, flush=True)
            if args.json:  # write as we go: a crash late in the sweep keeps the rest
                write_json(result, args.json)
    if not args.json:
        json.dump(result, sys.stdout, indent=1)
        print()


def write_json(result, path):
    with open(path, "w") as out:
        json.dump(result, out, indent=1)
        out.write("\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Time PyTorch SDPA backends and FlexAttention on the flashgen bench shapes.")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--dims", default="64,128", help="head dimensions, comma-separated (default 64,128)")
    which.add_argument("--sweep", action="store_true", help="the full head-dimension sweep (%d values)" % len(sweep_dims()))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=8192, help="sequence length N (queries = keys)")
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="bf16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per measurement (median)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--time-budget-s", type=float, default=DEFAULT_TIME_BUDGET_S,
                        help="per measurement: slow backends stop repeating after this much time "
                             "(at least %d repeats)" % MIN_REPEATS)
    parser.add_argument("--backends", default=",".join(BACKENDS), help="subset of " + ",".join(BACKENDS))
    parser.add_argument("--skip-gemm", action="store_true", help="do not measure the bf16 GEMM ceiling")
    parser.add_argument("--json", help="write results here (default: stdout)")
    args = parser.parse_args(argv)
    for name in ("batch", "heads", "seq", "repeats", "warmup"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    try:
        parse_backends(args.backends)
        if not args.sweep:
            parse_int_list(args.dims, "--dims")
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv=None):
    args = parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        sys.exit("peers.py: needs PyTorch with a CUDA GPU")
    run(args)


if __name__ == "__main__":
    main()
