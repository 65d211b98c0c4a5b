#!/usr/bin/env python3
"""Compares the machine code (SASS) two flashgen builds generate, kernel by kernel.

A change that should not alter the kernels (moving device headers, renaming,
computing the same shared-memory sizes another way) is checked by compiling
the same spread of kernels with both builds and comparing the SASS that
cuobjdump disassembles, with file names and line tables left out (headers
that moved change those, not the code). No GPU is needed: NVRTC compiles.

Each build's own `flashgen source --headers` gives the generated source and
the device headers it embeds, so the two sides are exactly what each library
would compile; the NVRTC options are the library's (src/cuda/runtime/compiler.cpp).

Usage:
  python3 scripts/compare_machine_code.py --before /tmp/build-main/flashgen \\
      --after build/flashgen [--quick] [--jobs 2] [--keep DIR] [--only REGEX]

Exit code 0 when every kernel's SASS is identical, 1 otherwise (the
differing kernels are listed; --keep DIR leaves both SASS listings there).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

FILE_MARK = re.compile(r"^// ---- file: (.+) ----$")

# Options that change the code, as the library passes them (-lineinfo and
# --ptxas-options=-v change only the line tables and the log).
NVRTC_OPTIONS = ["-std=c++17", "-default-device", "-lineinfo"]

DIMS = [1, 40, 64, 127, 128, 192, 199, 256, 257, 385, 512]
KINDS = ["forward", "backward_query", "backward_key_value", "backward_atomic"]
ROW_KINDS = ["backward_prepare", "convert_grad_q", "forward_combine", "backward_sinks"]

# Families the default tunings of the spread above do not pick on sm_90a.
FORCED = [
    ("forward", 128, "rows=128 cols=64 head=0 warps=8 cache=none mma=wgmma"),
    ("forward", 64, "rows=64 cols=64 head=0 warps=4 cache=Q"),
    ("forward", 96, "rows=128 cols=64 head=0 warps=8 cache=none mma=wgmma producer=warp stages=3"),
    ("backward_query", 64, "rows=64 cols=64 head=0 warps=4 cache=none mma=wgmma"),
    ("backward_key_value", 64, "rows=64 cols=64 head=0 warps=4 cache=none mma=wgmma"),
    ("backward_query", 128, "rows=64 cols=64 head=0 warps=4 cache=none"),
    ("backward_key_value", 128, "rows=64 cols=64 head=0 warps=4 cache=none"),
]


def cases(quick: bool) -> list[list[str]]:
    """flashgen source arguments of each kernel to compare."""
    out: list[list[str]] = []
    dims = [64, 127, 256, 512] if quick else DIMS
    for d in dims:
        for kind in KINDS:
            for causal in ([False] if quick else [False, True]):
                out.append(["--kind", kind, "--dqk", str(d)] + (["--causal"] if causal else []))
    for d in ([64, 199] if quick else [40, 64, 128, 199, 256]):
        for kind in KINDS:
            out.append(["--kind", kind, "--dqk", str(d), "--dtype", "f16"])
            out.append(["--kind", kind, "--dqk", str(d), "--arch", "sm_80"])
    for d in ([64, 127] if quick else [1, 64, 127, 128, 257]):
        for kind in KINDS[:3]:
            out.append(["--kind", kind, "--dqk", str(d), "--dtype", "f32"])
    for vec in ["1", "2", "4", "0"]:
        for kind in KINDS:
            out.append(["--kind", kind, "--dqk", "128", "--vec", vec])
    out.append(["--kind", "forward", "--dqk", "192", "--dv", "128"])
    out.append(["--kind", "backward_key_value", "--dqk", "192", "--dv", "128"])
    for kind in ROW_KINDS:
        out.append(["--kind", kind, "--dqk", "128"])
    for d in ([128] if quick else [64, 127, 128, 512]):  # decode's split-key forward
        out.append(["--kind", "forward", "--dqk", str(d), "--split-keys"])
        for cache in ["contiguous", "paged"]:  # ... reading a KV cache, of 16-bit or e4m3 values
            out.append(["--kind", "forward", "--dqk", str(d), "--split-keys", "--kv-cache", cache])
            out.append(["--kind", "forward", "--dqk", str(d), "--split-keys", "--kv-cache", cache,
                        "--fp8-cache"])
    for kind, d, tuning in FORCED:
        out.append(["--kind", kind, "--dqk", str(d), "--tuning", tuning])
    for modifiers in (["--softcap"], ["--alibi"], ["--softcap", "--alibi"]):  # score modifiers
        for kind in KINDS:
            out.append(["--kind", kind, "--dqk", "128", "--causal", *modifiers])
        for kind in KINDS[1:3]:
            out.append(["--kind", kind, "--dqk", "64", "--dtype", "f32", *modifiers])
    documents = ["--mask-mod", "doc[kv_idx] == doc[q_idx]", "--mask-arrays", "doc:i"]
    for kind in ["mask_blocks"] + KINDS[:3]:  # a user mask: its pre-pass and its kernels
        for causal in ([False] if quick else [False, True]):
            out.append(["--kind", kind, "--dqk", "128", *documents] + (["--causal"] if causal else []))
    return out


def generated(flashgen: str, args: list[str]) -> tuple[str, str, dict[str, str]] | None:
    """(arch, source, headers) of one kernel, or None where the build refuses it."""
    run = subprocess.run([flashgen, "source", *args, "--headers"], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for line in run.stdout.splitlines(keepends=True):
        mark = FILE_MARK.match(line.rstrip("\n"))
        if mark:
            current = mark.group(1)
            parts[current] = []
        else:
            parts[current].append(line)
    source_lines = parts.pop("")
    arch = args[args.index("--arch") + 1] if "--arch" in args else "sm_90a"
    # The first line is the listing's comment (spec, tuning, shared memory).
    return arch, "".join(source_lines[1:]), {name: "".join(text) for name, text in parts.items()}


def find_nvrtc() -> str:
    for pattern in ["/usr/local/cuda*/lib*/libnvrtc.so*", "/usr/lib/x86_64-linux-gnu/libnvrtc.so*"]:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    sys.exit("libnvrtc not found")


def find_cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    # The CUDA toolkit, else the copy Triton's wheel ships beside a Python.
    patterns = ["/usr/local/cuda*/bin/cuobjdump",
                "/tmp/*/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump",
                os.path.join(sys.prefix, "lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump")]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    sys.exit("cuobjdump not found (name it with --cuobjdump)")


class Nvrtc:
    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)

    def cubin(self, arch: str, source: str, headers: dict[str, str]) -> bytes:
        lib = self.lib
        program = ctypes.c_void_p()
        names = (ctypes.c_char_p * len(headers))(*[n.encode() for n in headers])
        texts = (ctypes.c_char_p * len(headers))(*[t.encode() for t in headers.values()])
        lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"kernel.cu",
                               len(headers), texts, names)
        options = [f"--gpu-architecture={arch}", *NVRTC_OPTIONS]
        array = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(program, len(options), array)
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            lib.nvrtcDestroyProgram(ctypes.byref(program))
            raise RuntimeError(log.value.decode(errors="replace")[-2000:])
        size = ctypes.c_size_t()
        lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
        image = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(program, image)
        lib.nvrtcDestroyProgram(ctypes.byref(program))
        return image.raw


def sass(cuobjdump: str, cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    # Keep the code: drop the listing's file names and line-table comments.
    keep = [line for line in text.splitlines()
            if not line.lstrip().startswith(("Fatbin", "code for", "//##", "File"))]
    return "\n".join(keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="flashgen CLI of the reference build")
    parser.add_argument("--after", required=True, help="flashgen CLI of the changed build")
    parser.add_argument("--quick", action="store_true", help="a smaller spread")
    parser.add_argument("--jobs", type=int, default=2, help="compiles at a time (default 2)")
    parser.add_argument("--nvrtc", default=None, help="libnvrtc.so to compile with")
    parser.add_argument("--cuobjdump", default=None)
    parser.add_argument("--keep", default=None, help="directory for the SASS of differing kernels")
    parser.add_argument("--only", default=None, metavar="REGEX",
                        help="only the cases whose arguments match (for example 'mask-mod')")
    a = parser.parse_args()
    nvrtc = Nvrtc(a.nvrtc or find_nvrtc())
    cuobjdump = a.cuobjdump or find_cuobjdump()

    def compare(args: list[str]) -> tuple[str, str]:
        label = " ".join(shlex.quote(x) for x in args)
        before, after = generated(a.before, args), generated(a.after, args)
        if before is None and after is None:
            return "refused by both", label
        if before is None or after is None:
            return "refused by one", label
        try:
            listings = [sass(cuobjdump, nvrtc.cubin(*side)) for side in (before, after)]
        except RuntimeError as error:
            return "not compiled", f"{label}\n{error}"

        if listings[0] == listings[1]:
            return "identical", label
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
            for name, text in zip(("before", "after"), listings):
                with open(os.path.join(a.keep, f"{stem}.{name}.sass"), "w") as f:
                    f.write(text)
        return "different", label

    counts: dict[str, int] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        chosen = [c for c in cases(a.quick) if not a.only or re.search(a.only, " ".join(c))]
        for verdict, label in pool.map(compare, chosen):
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict != "identical":
                print(f"{verdict}: {label}", flush=True)
    print(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return 0 if set(counts) <= {"identical", "refused by both"} else 1


if __name__ == "__main__":
    sys.exit(main())
