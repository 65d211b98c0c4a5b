#!/usr/bin/env python3
"""The sanitizer sweep: every kernel family the planner can pick, under
compute-sanitizer's memcheck, racecheck, synccheck and initcheck.

Each case is one `flashgen run` (a forward and a backward on small random
inputs, checked against the fp64 reference) on the GPU; FLASHGEN_TUNING
forces the families no shipped row picks on this GPU (mma.sync, the sm_80
kernels) and FLASHGEN_BACKWARD the atomic backward. A sanitizer report
names the kernel's entry (flashgen_forward, ...), and each kind runs once
per case, so every reported error is attributed to the plan string of the
kernel that `flashgen run` printed for that kind.

Writes {"device", "compute_sanitizer", "refused", "runs": [{"case", "kernel",
"tool", "errors", "explained"}]}: "errors" counts the unexplained reports
(memcheck's invalid accesses, racecheck's hazards, ...), "explained" those
matching a documented exception (EXCEPTIONS below). Where the sanitizer
refuses the device, the JSON says so ("refused") and the exit code is 2,
instead of a sweep of zeros.

Usage (on a GPU machine, after a build):
  python3 scripts/sanitize.py --flashgen build-gpu/flashgen --out FILE.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")

# The kernels' entry points, as a sanitizer report names them.
ENTRIES = ("flashgen_forward", "flashgen_backward_query", "flashgen_backward_key_value",
           "flashgen_backward_atomic", "flashgen_backward_prepare", "flashgen_convert_grad_q",
           "flashgen_forward_combine", "flashgen_backward_sinks", "flashgen_mask_blocks")
ENTRY_PATTERN = re.compile(r"\b(" + "|".join(ENTRIES) + r")\b")

# Hazards a tool reports where the code is ordered in a way the tool does
# not model: (pattern over the report's text, where the argument is
# written). None today.
EXCEPTIONS: list[tuple[re.Pattern, str]] = []

# The sm_80 family (mma.sync), which the planner picks on sm_80 and for
# rows with a dim stride other than 1; on sm_90 only a forced tuning runs it.
MMA_SYNC = ("forward: rows=64 cols=64 head=0 warps=4 cache=Q; "
            "backward_query: rows=64 cols=64 head=0 warps=4 cache=none; "
            "backward_key_value: rows=64 cols=64 head=0 warps=4 cache=none")

# The persistent forward, forced where the default would not walk.
PERSISTENT_FORWARD = ("forward: rows=128 cols=64 head=0 warps=8 cache=none mma=wgmma stages=2 "
                      "producer=warp copy=tma swizzle=32 schedule=persistent")

# The forward's warpgroups taking turns at the tensor cores (pingpong=1):
# two warpgroups on a grid, three walking their tiles.
PINGPONG_FORWARD = ("forward: rows=128 cols=64 head=0 warps=8 cache=none mma=wgmma stages=2 "
                    "producer=warp copy=tma swizzle=32 pingpong=1")
PINGPONG_WALK = ("forward: rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma stages=2 "
                 "producer=warp copy=tma swizzle=32 schedule=persistent pingpong=1")

# The TMA producers on rows that are not 16-byte aligned (token-row views,
# stages fixed by a second warp), forced where a table row picks another
# kernel: the forward's, the query backward's and the key/value backward's
# (dK and dV in each warpgroup to Dqk + Dv = 256, split between two past it;
# the key/value kernel takes them only without grouped query heads).
TOKEN_ROWS_FORWARD = ("forward: rows=128 cols=64 head=0 warps=8 cache=none mma=wgmma stages=2 "
                      "producer=warp copy=tma swizzle=32")
TOKEN_ROWS_QUERY = ("backward_query: rows=128 cols=32 head=0 warps=8 cache=none mma=wgmma "
                    "producer=warp copy=tma swizzle=32")
TOKEN_ROWS = "; ".join([TOKEN_ROWS_FORWARD, TOKEN_ROWS_QUERY, TOKEN_ROWS_QUERY.replace(
    "backward_query", "backward_key_value")])
TOKEN_ROWS_SPLIT = "; ".join([TOKEN_ROWS_FORWARD, TOKEN_ROWS_QUERY, (
    "backward_key_value: rows=64 cols=64 head=0 warps=8 cache=none mma=wgmma producer=warp "
    "copy=tma split=outputs swizzle=32")])
# Both backward kernels' warpgroups splitting the head dims on token rows,
# with their own rows' operands in shared memory (the default holds them in
# registers).
TOKEN_ROWS_DIMS = "; ".join([
    "backward_query: rows=64 cols=32 head=0 warps=8 cache=none mma=wgmma stages=2 "
    "producer=warp copy=tma split=dims swizzle=32",
    "backward_key_value: rows=64 cols=32 head=0 warps=8 cache=none mma=wgmma stages=3 "
    "producer=warp copy=tma split=dims swizzle=32"])

# (label, flashgen run arguments, environment). Small shapes whose lengths
# are multiples of no tile (1, 2, 65, 130, 257, 300), causal and not, GQA,
# Dv != Dqk, Sq != Skv, every load path (TMA for 16-byte rows, cp.async for
# 8- and 4-byte rows, staged and shifted copies for 2-byte rows).
CASES = [
    ("d1", "--dim 1 --seq 1 --heads 2", {}),
    ("d8-causal", "--dim 8 --seq 2 --seq-kv 65 --causal --heads 2", {}),
    ("d40-gqa", "--dim 40 --seq 65 --heads 4 --heads-kv 2", {}),
    ("d64-atomic", "--dim 64 --seq 300 --heads 2 --deterministic 0", {}),
    ("d64-causal", "--dim 64 --seq 130 --seq-kv 257 --causal --heads 2", {}),
    ("d66-cp.async", "--dim 66 --seq 130 --heads 2 --causal", {}),
    ("d68-cp.async", "--dim 68 --seq 257 --heads 2", {}),
    ("d72-gqa", "--dim 72 --seq 257 --heads 4 --heads-kv 1", {}),
    ("d127-causal", "--dim 127 --seq 130 --causal --heads 2", {}),
    ("d128-gqa-causal", "--dim 128 --seq 300 --seq-kv 65 --causal --heads 4 --heads-kv 1", {}),
    ("d128-f16", "--dim 128 --seq 130 --dtype f16 --heads 2", {}),
    ("d192-128-gqa-causal",
     "--dim 192 --dim-v 128 --seq 257 --seq-kv 300 --causal --heads 4 --heads-kv 2", {}),
    ("d199", "--dim 199 --seq 65 --heads 2", {}),
    ("d256-causal", "--dim 256 --seq 130 --causal --heads 2", {}),
    ("d257", "--dim 257 --seq 130 --heads 1", {}),
    ("d320-gqa-causal", "--dim 320 --seq 257 --causal --heads 2 --heads-kv 1", {}),
    ("d385", "--dim 385 --seq 130 --heads 1", {}),
    ("d512-causal", "--dim 512 --seq 65 --causal --heads 1", {}),
    ("d64-atomic-forced", "--dim 64 --seq 130 --causal --heads 2 --deterministic 0",
     {"FLASHGEN_BACKWARD": "atomic"}),
    ("d127-atomic", "--dim 127 --seq 65 --heads 2 --deterministic 0",
     {"FLASHGEN_BACKWARD": "atomic"}),
    ("d256-atomic", "--dim 256 --seq 130 --heads 2 --causal --deterministic 0",
     {"FLASHGEN_BACKWARD": "atomic"}),
    ("d384-atomic", "--dim 384 --seq 65 --heads 1 --deterministic 0",
     {"FLASHGEN_BACKWARD": "atomic"}),
    ("f32-d64-causal", "--dim 64 --seq 130 --causal --heads 2 --dtype f32", {}),
    ("f32-d127", "--dim 127 --seq 65 --heads 2 --heads-kv 1 --dtype f32", {}),
    ("mma.sync-d64", "--dim 64 --seq 130 --causal --heads 2", {"FLASHGEN_TUNING": MMA_SYNC}),
    ("mma.sync-d127", "--dim 127 --seq 65 --heads 2", {"FLASHGEN_TUNING": MMA_SYNC}),
    ("d127-token-rows-gqa-causal", "--dim 127 --seq 257 --seq-kv 300 --causal --heads 16 --heads-kv 8",
     {"FLASHGEN_TUNING": TOKEN_ROWS}),
    ("d100-token-rows", "--dim 100 --seq 130 --heads 4", {"FLASHGEN_TUNING": TOKEN_ROWS}),
    ("d199-token-rows-window", "--dim 199 --seq 200 --causal --window-left 50 --heads 8",
     {"FLASHGEN_TUNING": TOKEN_ROWS_SPLIT}),
    ("d127-token-rows-split", "--dim 127 --seq 130 --seq-kv 257 --heads 3",
     {"FLASHGEN_TUNING": TOKEN_ROWS_SPLIT}),
    ("d385-token-rows", "--dim 385 --seq 130 --heads 8",
     {"FLASHGEN_TUNING": TOKEN_ROWS_FORWARD.replace("cols=64 head=0", "cols=32 head=256")}),
    ("d257-token-rows-dims-causal", "--dim 257 --seq 130 --seq-kv 200 --causal --heads 8",
     {"FLASHGEN_TUNING": TOKEN_ROWS_DIMS}),
    ("d385-token-rows-dims-gqa", "--dim 385 --seq 130 --heads 8 --heads-kv 2", {}),
    # Decode: query heads packed as rows, keys shared by CTAs and combined.
    # More tiles than SMs: the persistent forward's CTAs walk several each
    # (schedule=persistent: the default where query blocks traverse few keys,
    # forced for causal tiles with no keys).
    ("d64-persistent-walk", "--dim 64 --seq 257 --heads 160", {}),
    ("d64-persistent-walk-window", "--dim 64 --seq 2000 --causal --window-left 128 --heads 16 --heads-kv 4",
     {}),
    ("d128-persistent-walk-empty-tiles",
     "--dim 128 --seq 700 --seq-kv 200 --causal --heads 48 --heads-kv 16",
     {"FLASHGEN_TUNING": PERSISTENT_FORWARD}),
    ("d128-pingpong-causal", "--dim 128 --seq 300 --seq-kv 333 --causal --heads 4 --heads-kv 2",
     {"FLASHGEN_TUNING": PINGPONG_FORWARD}),
    ("d64-pingpong-walk", "--dim 64 --seq 200 --heads 140 --heads-kv 20",
     {"FLASHGEN_TUNING": PINGPONG_WALK}),
    ("d127-pingpong-token-rows", "--dim 127 --seq 257 --causal --heads 16 --heads-kv 8",
     {"FLASHGEN_TUNING": PINGPONG_FORWARD}),
    ("d64-window-causal", "--dim 64 --seq 300 --causal --window-left 100 --heads 2", {}),
    ("d128-window-softcap-gqa",
     "--dim 128 --seq 257 --seq-kv 300 --causal --window-left 64 --softcap 20 --heads 4 --heads-kv 2",
     {}),
    ("d127-top-left-softcap",
     "--dim 127 --seq 70 --seq-kv 300 --causal --top-left --softcap 5 --heads 2", {}),
    ("d128-alibi-softcap-gqa-causal",
     "--dim 128 --seq 300 --seq-kv 333 --causal --softcap 3 --alibi --heads 4 --heads-kv 2", {}),
    ("d127-alibi-softcap-atomic",
     "--dim 127 --seq 130 --softcap 5 --alibi --heads 2 --deterministic 0", {}),
    ("d256-window-softcap-atomic",
     "--dim 256 --seq 200 --causal --window-left 64 --softcap 30 --heads 2 --deterministic 0", {}),
    ("d384-window-two-sided", "--dim 384 --seq 130 --window-left 40 --window-right 17 --heads 1",
     {}),
    ("f32-d40-window-softcap",
     "--dim 40 --seq 130 --causal --window-left 30 --softcap 3 --dtype f32 --heads 2", {}),
    ("mma.sync-d64-window", "--dim 64 --seq 130 --window-left 50 --window-right 0 --heads 2",
     {"FLASHGEN_TUNING": MMA_SYNC}),
    ("d64-window-sinks-gqa",
     "--dim 64 --seq 300 --causal --window-left 50 --sinks --heads 4 --heads-kv 1", {}),
    ("d128-alibi-causal", "--dim 128 --seq 200 --seq-kv 333 --causal --alibi --heads 4 --heads-kv 2",
     {}),
    ("d64-alibi-sinks-atomic", "--dim 64 --seq 130 --alibi --sinks --heads 2 --deterministic 0", {}),
    ("f32-d40-alibi-sinks", "--dim 40 --seq 130 --causal --alibi --sinks --dtype f32 --heads 2", {}),
    ("decode-d128-sinks-split", "--dim 128 --seq 1 --seq-kv 1500 --sinks --heads 8 --heads-kv 2", {}),
    ("decode-d128-gqa-split", "--dim 128 --seq 1 --seq-kv 1500 --heads 8 --heads-kv 2 --batch 2", {}),
    # Decode with the query heads packed as rows: a window as a range of
    # keys and sinks read by row (one share), a mask of keys alone.
    ("decode-d64-window-sinks-packed",
     "--dim 64 --seq 1 --seq-kv 700 --causal --window-left 128 --sinks --heads 16 --heads-kv 2", {}),
    ("decode-d128-keys-mask-packed",
     "--dim 128 --seq 1 --seq-kv 1500 --mask-mod kv_idx<1000&&doc[kv_idx]!=2 --heads 8 --heads-kv 2",
     {}),
    ("decode-d127-causal-split", "--dim 127 --seq 16 --seq-kv 1100 --causal --heads 4 --heads-kv 2",
     {}),
    # Rows of tens of shares, merged by 8 and 4 warps each (the combine).
    ("decode-d64-many-shares", "--dim 64 --seq 1 --seq-kv 16500 --causal --heads 4 --heads-kv 1", {}),
    ("decode-d128-sinks-shares-by-parts",
     "--dim 128 --seq 1 --seq-kv 9000 --sinks --heads 8 --heads-kv 2", {}),
    # gpt-oss's narrow window: the query kernel's 64-row mma.sync blocks.
    ("d64-window128-sinks-query-blocks",
     "--dim 64 --seq 1000 --causal --window-left 128 --sinks --heads 4 --heads-kv 1", {}),
    # User masks (written without spaces: the arguments split at them).
    ("d64-documents-causal-gqa",
     "--dim 64 --seq 300 --causal --mask-mod doc[kv_idx]==doc[q_idx] --heads 4 --heads-kv 2", {}),
    ("d128-mask-division-atomic",
     "--dim 128 --seq 200 --seq-kv 260 --mask-mod q_idx%(kv_idx%5+1)!=3 --heads 2 --deterministic 0",
     {}),
    ("d256-documents-window",
     "--dim 256 --seq 257 --causal --window-left 100 --mask-mod doc[kv_idx]==doc[q_idx] --heads 2",
     {}),
    ("f32-d40-documents", "--dim 40 --seq 130 --dtype f32 --mask-mod doc[kv_idx]==doc[q_idx] --heads 2",
     {}),
    # A table row's key/value block narrowed for the mask (cuda::tuning_for).
    ("d128-documents-causal-row", "--dim 128 --seq 600 --causal --mask-mod doc[kv_idx]==doc[q_idx] "
     "--documents 512,88 --heads 2", {}),
    ("decode-d128-mask-split",
     "--dim 128 --seq 1 --seq-kv 1500 --mask-mod doc[kv_idx]!=2 --heads 8 --heads-kv 2", {}),
    # Documents longer than a block: whole blocks inside one document skip
    # the evaluation (the wholly attended runs mask_blocks records).
    ("d128-documents-whole-blocks",
     "--dim 128 --seq 600 --mask-mod doc[kv_idx]==doc[q_idx] --documents 512,88 --heads 2", {}),
    ("mma.sync-d64-documents", "--dim 64 --seq 130 --mask-mod doc[kv_idx]==doc[q_idx] --heads 2",
     {"FLASHGEN_TUNING": MMA_SYNC}),
]

# What compute-sanitizer prints on a GPU it cannot instrument (then the
# program's first allocation fails with error 999).
REFUSED_MARKERS = ("Device not supported", "device not supported", "CUDA_ERROR_UNKNOWN (error 999)")


def plan_kernels(stdout: str) -> dict:
    """{entry: plan string} from `flashgen run`'s plan lines."""
    plans, in_plan = [], False
    for line in stdout.splitlines():
        if line.startswith(("forward plan:", "backward plan:")):
            in_plan = True
            plans.append(line.split(":", 1)[1].strip())
        elif in_plan and line.startswith(" " * 16) and line.strip() and ":" not in line[:16]:
            plans.append(line.strip())
        else:
            in_plan = False
    kernels = {}
    for plan in plans:
        kind = plan.split(" ", 1)[0]
        entry = "flashgen_" + kind
        if entry in ENTRIES:
            kernels[entry] = plan
    return kernels


def report_blocks(output: str) -> list[str]:
    """The sanitizer's reports, one text each: a line of the tool's prefix
    that is not indented opens one, indented lines continue it."""
    blocks: list[list[str]] = []
    for line in output.splitlines():
        if not line.startswith("========= "):
            continue
        body = line[len("========= "):]
        if not body.strip():
            continue  # the blank line between reports
        if body.startswith(" "):
            if blocks:
                blocks[-1].append(body)
            continue
        if re.match(r"(ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|LEAK SUMMARY)", body):
            continue
        blocks.append([body])
    return ["\n".join(block) for block in blocks]


def summary_errors(output: str) -> int | None:
    """The total the tool prints last, or None where it printed none."""
    match = re.search(r"ERROR SUMMARY: (\d+) errors?", output)
    if match:
        return int(match.group(1))
    match = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)",
                      output)
    if match:
        return int(match.group(1)) + int(match.group(2))
    return None


def attribute(output: str, kernels: dict) -> dict:
    """{plan string or "(unattributed)": [errors, explained]} for one run: a
    report each (racecheck's analysis report is one per pair of accesses,
    however many hazards it stands for, as its summary counts them)."""
    counts = {plan: [0, 0] for plan in kernels.values()}
    for block in report_blocks(output):
        if block.startswith("Target application returned an error"):
            continue  # the program's exit status, not a report the summary counts
        entry = ENTRY_PATTERN.search(block)
        plan = kernels.get(entry.group(1)) if entry else None
        key = plan if plan is not None else "(unattributed)"
        counts.setdefault(key, [0, 0])
        explained = any(pattern.search(block) for pattern, _ in EXCEPTIONS)
        counts[key][1 if explained else 0] += 1
    return counts


def sanitized_run(flashgen: str, tool: str, case: tuple, cache_dir: str,
                  timeout: int) -> tuple[str, int | str]:
    """One case under one tool: (everything it printed, exit status)."""
    label, arguments, extra_env = case
    env = dict(os.environ, FLASHGEN_CACHE_DIR=cache_dir, **extra_env)
    command = ["compute-sanitizer", "--tool", tool]
    if tool == "racecheck":
        command += ["--racecheck-report", "analysis"]
    command += [flashgen, "run", "--backend", "cuda", "--batch", "1"] + arguments.split()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        return done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as timeout_error:
        partial = timeout_error.stdout or b""
        return (partial.decode() if isinstance(partial, bytes) else partial), "timeout"


def judge(tool: str, case: tuple, output: str, status) -> dict:
    """What one run's output says: errors per kernel, and anything odd."""
    label, arguments, extra_env = case
    kernels = plan_kernels(output)
    counts = attribute(output, kernels)
    refused = any(marker in output for marker in REFUSED_MARKERS) and not kernels
    total = summary_errors(output)
    counted = sum(e + x for e, x in counts.values())
    problems = []
    if status != 0:
        problems.append(f"exit status {status}")
    if total is None and not refused:
        problems.append("no summary line")
    elif total is not None and total != counted:
        problems.append(f"summary says {total}, reports counted {counted}")
    if not kernels and not refused:
        problems.append("no plan printed")
    return {"case": label, "arguments": arguments, "env": extra_env, "tool": tool,
            "counts": counts, "refused": refused, "problems": problems,
            "tail": output[-4000:] if problems or any(e for e, _ in counts.values()) else ""}


def handover_pattern(timeout: int) -> dict:
    """racecheck's verdict on the producer's hand-over alone, both ways
    (tests/sanitize/handover_pattern.cu): {"lane0": hazards, "all": hazards}."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests",
                          "sanitize", "handover_pattern.cu")
    binary = os.path.join(tempfile.mkdtemp(prefix="flashgen-pattern-"), "handover_pattern")
    try:
        subprocess.run(["nvcc", "-arch=sm_90a", "-o", binary, source], check=True,
                       capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        return {"error": f"not built: {error}"}
    verdict = {}
    for variant in ("lane0", "all"):
        output = subprocess.run(["compute-sanitizer", "--tool", "racecheck", "--racecheck-report",
                                 "analysis", binary, variant], capture_output=True, text=True,
                                timeout=timeout)
        text = output.stdout + output.stderr
        verdict[variant] = summary_errors(text)
        if f"handover_pattern {variant}: ok" not in text:
            verdict[variant + "_result"] = "wrong values"
    return verdict


def device_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sanitizer_version() -> str:
    try:
        text = subprocess.run(["compute-sanitizer", "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "not found"
    match = re.search(r"Version ([\w.]+)", text)
    return match.group(1) if match else text.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flashgen", default="build-gpu/flashgen", help="the flashgen command")
    parser.add_argument("--out", help="the JSON to write (default: stdout only)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    parser.add_argument("--cases", default="", help="regex over case labels (default: all)")
    parser.add_argument("--jobs", type=int, default=4, help="runs at once (one GPU serves them)")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per run")
    parser.add_argument("--log", help="write every run's failing output here")
    parser.add_argument("--raw", help="keep every run's whole output in this folder")
    parser.add_argument("--from-raw", help="judge the outputs a --raw folder kept, run nothing")
    args = parser.parse_args()

    tools = [t for t in args.tools.split(",") if t]
    cases = [c for c in CASES if re.search(args.cases, c[0])]
    jobs = [(tool, case) for tool in tools for case in cases]
    if args.from_raw:  # judge saved outputs again (exit statuses in status.json)
        with open(os.path.join(args.from_raw, "status.json")) as f:
            saved = json.load(f)
        device, version, statuses = saved["device"], saved["compute_sanitizer"], saved["statuses"]
        pattern = saved.get("handover_pattern")
        runs_output = []
        for tool, case in jobs:
            with open(os.path.join(args.from_raw, f"{case[0]}.{tool}.txt")) as f:
                runs_output.append((f.read(), statuses[f"{case[0]}.{tool}"]))
    else:
        device, version = device_name(), sanitizer_version()
        pattern = handover_pattern(args.timeout)
        cache_dir = tempfile.mkdtemp(prefix="flashgen-sanitize-")
        # Compile every kernel once, outside the sanitizer, so the runs share
        # the disk cache and no run pays NVRTC's time under instrumentation.
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda c: subprocess.run(
                [args.flashgen, "run", "--backend", "cuda", "--batch", "1"] + c[1].split(),
                env=dict(os.environ, FLASHGEN_CACHE_DIR=cache_dir, **c[2]), capture_output=True),
                cases))
            runs_output = list(pool.map(lambda j: sanitized_run(args.flashgen, j[0], j[1],
                                                                cache_dir, args.timeout), jobs))
        if args.raw:
            os.makedirs(args.raw, exist_ok=True)
            for (tool, case), (output, _) in zip(jobs, runs_output):
                with open(os.path.join(args.raw, f"{case[0]}.{tool}.txt"), "w") as f:
                    f.write(output)
            with open(os.path.join(args.raw, "status.json"), "w") as f:
                json.dump({"device": device, "compute_sanitizer": version,
                           "handover_pattern": pattern,
                           "statuses": {f"{case[0]}.{tool}": status
                                        for (tool, case), (_, status) in zip(jobs, runs_output)}},
                          f, indent=1)
    results = [judge(tool, case, output, status)
               for (tool, case), (output, status) in zip(jobs, runs_output)]

    refused = any(r["refused"] for r in results)
    runs = []
    for r in results:
        for kernel, (errors, explained) in sorted(r["counts"].items()):
            runs.append({"case": r["case"], "kernel": kernel, "tool": r["tool"],
                         "errors": errors, "explained": explained})
    report = {"device": device, "compute_sanitizer": version,
              "date": datetime.date.today().isoformat(), "refused": refused,
              "cases": {label: {"arguments": a, "env": e} for label, a, e in cases},
              # racecheck on tests/sanitize/handover_pattern.cu: one lane's
              # arrival after a warp barrier is reported ("lane0"), each
              # thread's own arrival is not ("all", what the kernels do).
              "handover_pattern": pattern,
              "runs": runs,
              "problems": [{"case": r["case"], "tool": r["tool"], "problems": r["problems"]}
                           for r in results if r["problems"]]}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    if args.log:
        with open(args.log, "w") as f:
            for r in results:
                if r["tail"]:
                    f.write(f"##### {r['case']} {r['tool']} {r['problems']}\n{r['tail']}\n")

    if refused:
        print("sanitize: compute-sanitizer refused this device: no run was checked", file=sys.stderr)
        return 2
    width = max(len(c[0]) for c in cases)
    print(f"{'case':<{width}}  " + "  ".join(f"{t:>9}" for t in tools))
    for label, _, _ in cases:
        cells = []
        for tool in tools:
            r = next(x for x in results if x["case"] == label and x["tool"] == tool)
            errors = sum(e for e, _ in r["counts"].values())
            explained = sum(x for _, x in r["counts"].values())
            cell = f"{errors}" + (f"+{explained}x" if explained else "") + ("!" if r["problems"] else "")
            cells.append(f"{cell:>9}")
        print(f"{label:<{width}}  " + "  ".join(cells))
    errors = sum(run["errors"] for run in runs)
    explained = sum(run["explained"] for run in runs)
    problems = sum(1 for r in results if r["problems"])
    kernels = len({run["kernel"] for run in runs})
    print(f"sanitize: {len(results)} runs over {kernels} kernels: {errors} unexplained errors, "
          f"{explained} explained, {problems} runs with problems (! above)")
    return 0 if errors == 0 and problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
