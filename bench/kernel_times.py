#!/usr/bin/env python3
"""GPU time per kernel of flashgen's calls on workloads of the suite.

Where a workload of bench/workloads.py is slower than expected, this says
which of the kernels a call launches takes the time (the attention kernel,
a split's combine, the user mask's mask_blocks, the backward's row sums):
PyTorch's profiler over a few calls after warm-up, each kernel's GPU time
per call. With --tunings, the same under each forced tuning of a file (a
FLASHGEN_TUNING a line; an empty line: the tables' and heuristics' choice),
each row also timed as bench/workloads.py times it, and --json writes the
rows (the workload suite's fields, the tuning, kernels_us).

    python3 bench/kernel_times.py --only 'documents|decode' [--backward] [--system flashgen_atomic]
        [--tunings FILE --json OUT.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import types

import torch
from torch.profiler import ProfilerActivity, profile

import workloads


def kernel_times(w, system, backward, calls):
    """[(kernel name, GPU µs per call)] of `calls` calls, the longest first."""
    inputs = workloads.make_inputs(w, 1, requires_grad=backward)[0]
    call = workloads.system_call(system, w)

    def once():
        o = call(inputs["q"], inputs["k"], inputs["v"])
        if backward:
            o.backward(inputs["grad_out"])
    for _ in range(3):
        once()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            once()
        torch.cuda.synchronize()
    total = collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            total[event.name] += event.device_time
    return [(name, us / calls) for name, us in total.most_common()]


def timed_rows(suite, system, backward, calls, tunings):
    """Per tuning and workload: workloads.measure's row, the tuning and kernels_us."""
    peers = workloads.load_peers_module()
    timing = types.SimpleNamespace(warmup=5, repeats=20, time_budget_s=20.0, forward_only=not backward)
    rows = []
    for tuning in tunings:
        if tuning:
            os.environ["FLASHGEN_TUNING"] = tuning
        else:
            os.environ.pop("FLASHGEN_TUNING", None)
        for w in suite:
            row = workloads.measure(system, w, peers, timing)
            row["tuning"] = tuning
            if "error" not in row:
                row["kernels_us"] = {name[:90]: round(us, 1) for name, us in
                                     kernel_times(w, system, backward and w.backward, calls)}
            rows.append(row)
            yield rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(workloads.DEFAULT_SUITE))
    parser.add_argument("--only", required=True, help="regex over the workloads' names")
    parser.add_argument("--system", default="flashgen", help="flashgen or flashgen_atomic")
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--tunings", help="file of FLASHGEN_TUNING values, a line each ('' none)")
    parser.add_argument("--json", help="with --tunings: write the rows here (as they come)")
    args = parser.parse_args(argv)
    suite, _ = workloads.load_suite(args.suite, args.only)
    system = args.system.replace("_", " ")
    if args.tunings:
        lines = pathlib.Path(args.tunings).read_text().splitlines()
        tunings = [line for line in lines if not line.startswith("#")]
        for rows in timed_rows(suite, system, args.backward, args.calls, tunings):
            row = rows[-1]
            print(f"{row['workload'][:50]:50s} fwd {row.get('fwd_ms', float('nan')):.4f} ms "
                  f"bwd {row.get('bwd_ms', float('nan')):.4f} ms {row.get('error', '')[:60]} | {row['tuning']}")
            for name, us in list(row.get("kernels_us", {}).items())[:5]:
                print(f"  {us:9.1f} us  {name[:100]}")
            if args.json:
                pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        return
    for w in suite:
        print(f"{w.name}:")
        backward = args.backward and w.backward  # decode rows time the forward alone
        for name, us in kernel_times(w, system, backward, args.calls):
            print(f"  {us:9.1f} us  {name[:110]}")


if __name__ == "__main__":
    main()
