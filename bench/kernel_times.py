#!/usr/bin/env python3
"""GPU time per kernel of flashgen's calls on workloads of the suite.

Where a workload of bench/workloads.py is slower than expected, this says
which of the kernels a call launches takes the time (the attention kernel,
a split's combine, the user mask's mask_blocks, the backward's row sums):
PyTorch's profiler over a few calls after warm-up, each kernel's GPU time
per call.

    python3 bench/kernel_times.py --only 'documents|decode' [--backward] [--system flashgen_atomic]
"""

from __future__ import annotations

import argparse
import collections

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(workloads.DEFAULT_SUITE))
    parser.add_argument("--only", required=True, help="regex over the workloads' names")
    parser.add_argument("--system", default="flashgen", help="flashgen or flashgen_atomic")
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args(argv)
    suite, _ = workloads.load_suite(args.suite, args.only)
    for w in suite:
        print(f"{w.name}:")
        backward = args.backward and w.backward  # decode rows time the forward alone
        for name, us in kernel_times(w, args.system.replace("_", " "), backward, args.calls):
            print(f"  {us:9.1f} us  {name[:110]}")


if __name__ == "__main__":
    main()
