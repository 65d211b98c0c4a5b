#!/usr/bin/env python3
"""flashgen and its peers on the shapes people train and serve.

Runs the suite of bench/workloads.json through the Python package
(flashgen.attention, layout "bshd", what a model calls) and through PyTorch's
attention kernels in the same process: SDPA forced to cuDNN, FLASH (FA2) and
EFFICIENT, and FlexAttention compiled with a block mask for causal. Every
system reads the same [batch, seq, heads, dim] tensors (SDPA and Flex through
transposed views, as models call them), with GQA passed as such
(enable_gqa), and bottom-right causal where seq_q != seq_kv. Workloads with
a sliding window, a soft cap or sinks run where a peer can express them:
FlexAttention (window as a block mask, soft cap as a score_mod; sinks
nowhere); the SDPA backends refuse them. A document-masked packed batch
(documents: the lengths of the packed sequences) is flashgen's mask_mod
"doc[kv_idx] == doc[q_idx]", Flex's block mask from the same rule, and a
boolean attn_mask for the SDPA backends that take one.

Each system's output is first checked against an fp32 computation of a few
query rows, so a system that computes something else (top-left causal, say)
is reported as a mismatch, not timed. Times are medians of CUDA events after
warm-up, inputs random normal, rotated so that no repeat finds them in L2
(bench/peers.py's timing). "flashgen" is the deterministic backward,
"flashgen atomic" the backward with deterministic=False.

The "host" workloads measure wall time per call on problems too small for
the GPU to matter: forward alone (inputs without grad) and forward +
backward, flashgen against SDPA's default choice.

    python3 bench/workloads.py --json bench/results/<gpu>/workloads_<date>.json
    python3 bench/workloads.py --report FILE.json [FILE.json ...] [--plot FILE.png]

Writes {"tool": "workloads", "device", "torch", "cudnn", "flashgen", "date",
"gemm_tflops", "rows": [{"workload", "system", "shape", "fwd_ms", "bwd_ms",
"fwd_tflops", "bwd_tflops", "gbps"} or "error"/"bwd_error"]}; host rows carry
"fwd_wall_us" and "fwd_bwd_wall_us". FLOPs count the attended (query, key)
pairs: forward 2·pairs·(Dqk + Dv), backward 2·pairs·(3·Dqk + 2·Dv), per
batch and query head. gbps: bytes of q, k, v and o over the forward time.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import pathlib
import re
import sys
import time

try:
    import torch
except ImportError:  # --report and the pure helpers work without PyTorch
    torch = None

BENCH_DIR = pathlib.Path(__file__).resolve().parent
# The package of this tree (python/), found without installing it.
sys.path.insert(0, str(BENCH_DIR.parent / "python"))
DEFAULT_SUITE = BENCH_DIR / "workloads.json"
PEERS = ("cudnn", "flash", "efficient", "flex")
SYSTEMS = ("flashgen", "flashgen atomic") + PEERS
DISPLAY = {"flashgen": "flashgen", "flashgen atomic": "flashgen atomic", "cudnn": "cuDNN",
           "flash": "FA2", "efficient": "EFFICIENT", "flex": "FlexAttention"}
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "f32": 4}
# Largest |system - fp32| over the checked rows, relative to max |fp32|.
AGREEMENT = {"bf16": 2e-2, "fp16": 5e-3, "f32": 1e-4}
CHECKED_ROWS = 48
HOST_CALLS = 200


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    batch: int
    heads_q: int
    seq_q: int
    dim_qk: int
    causal: bool
    heads_kv: int = 0   # 0: heads_q
    seq_kv: int = 0     # 0: seq_q
    dim_v: int = 0      # 0: dim_qk
    dtype: str = "bf16"
    backward: bool = True  # False: decode, timed forward only
    window: tuple = (-1, -1)  # (left, right) as flash-attn's window_size; -1 unbounded
    softcap: float = 0.0      # 0: none
    sinks: bool = False       # a sink logit per query head (values fixed per run)
    documents: tuple = ()     # lengths of packed documents (summing to seq_q = seq_kv); () none
    mask_every_pair: bool = False  # flashgen only: mask_mod "kv_idx >= 0", the mask machinery's price
    varlen: bool = False  # flashgen only: the batch's sequences packed, through attention_varlen
    kv_cache: bool = False  # flashgen only: k, v as a full KV cache, through attention_with_kvcache
    page_size: int = 0      # with kv_cache: paged in pages of this many rows (0: contiguous)
    kv_fp8: bool = False    # with kv_cache: the cache stored as float8_e4m3fn (scale 1)

    def __post_init__(self):
        for field in ("heads_kv", "seq_kv", "dim_v"):
            if getattr(self, field) == 0:
                object.__setattr__(self, field, getattr(self, {"heads_kv": "heads_q", "seq_kv": "seq_q",
                                                                "dim_v": "dim_qk"}[field]))
        for field in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "dim_qk", "dim_v"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"workload '{self.name}': {field} must be a positive integer, not {value!r}")
        if self.heads_q % self.heads_kv:
            raise ValueError(f"workload '{self.name}': heads_kv ({self.heads_kv}) must divide heads_q ({self.heads_q})")
        if self.dtype not in ELEMENT_BYTES:
            raise ValueError(f"workload '{self.name}': dtype must be one of {sorted(ELEMENT_BYTES)}")
        object.__setattr__(self, "window", tuple(self.window))
        if len(self.window) != 2 or any(not isinstance(x, int) or x < -1 for x in self.window):
            raise ValueError(f"workload '{self.name}': window must be [left, right], each >= -1")
        object.__setattr__(self, "documents", tuple(self.documents))
        if self.kv_cache and (self.page_size < 0 or self.page_size % 16 or self.seq_kv % max(self.page_size, 1)):
            raise ValueError(f"workload '{self.name}': page_size must be 0 or a multiple of 16 dividing seq_kv")
        if self.kv_fp8 and not self.kv_cache:
            raise ValueError(f"workload '{self.name}': kv_fp8 is a KV cache's storage (kv_cache)")
        if self.documents and (sum(self.documents) != self.seq_q or self.seq_q != self.seq_kv
                               or self.window != (-1, -1)):
            raise ValueError(f"workload '{self.name}': documents must sum to seq_q = seq_kv "
                             "(and come without a window)")

    @property
    def modified(self):
        """Whether the workload masks or modifies scores beyond causal."""
        return (self.window != (-1, -1) or self.softcap > 0 or self.sinks or bool(self.documents)
                or self.mask_every_pair)

    def shape(self):
        modifiers = ("window", "softcap", "sinks", "documents", "mask_every_pair")
        return {key: (list(value) if key in ("window", "documents") else value)
                for key, value in dataclasses.asdict(self).items()
                if key not in ("name", "backward") and (key not in modifiers or self.modified)
                and (key not in ("varlen", "kv_cache", "kv_fp8") or value)
                and (key != "page_size" or self.kv_cache)}


# ----------------------------------------------------------------------------
# Pure helpers (no PyTorch)
# ----------------------------------------------------------------------------

def load_suite(path, only=None):
    """(workloads, host workloads) from the suite file, filtered by the regex only."""
    data = json.loads(pathlib.Path(path).read_text())
    pattern = re.compile(only) if only else None

    def parse(entries):
        loaded = [Workload(**entry) for entry in entries]
        return [w for w in loaded if pattern is None or pattern.search(w.name)]
    return parse(data.get("workloads", [])), parse(data.get("host", []))


def attended_pairs(seq_q, seq_kv, causal, window=(-1, -1), documents=()):
    """(query, key) pairs computed per head; causal is bottom-right aligned,
    the window (left, right) measured from the same diagonal; packed
    documents attend within themselves."""
    if documents:
        return sum(n * (n + 1) // 2 if causal else n * n for n in documents)
    offset = seq_kv - seq_q  # query i's diagonal is key i + offset
    if not causal and window == (-1, -1):
        return seq_q * seq_kv
    left, right = window
    pairs = 0
    for i in range(seq_q):
        begin = 0 if left < 0 else max(0, i + offset - left)
        end = seq_kv if right < 0 else min(seq_kv, i + offset + right + 1)
        if causal:
            end = min(end, i + offset + 1)
        pairs += max(0, end - begin)
    return pairs


def forward_flops(w):
    pairs = attended_pairs(w.seq_q, w.seq_kv, w.causal, w.window, w.documents)
    return 2.0 * w.batch * w.heads_q * pairs * (w.dim_qk + w.dim_v)


def backward_flops(w):
    """S and dP recomputed/formed (Dqk, Dv), dV (Dv), dQ and dK (Dqk each)."""
    pairs = attended_pairs(w.seq_q, w.seq_kv, w.causal, w.window, w.documents)
    return 2.0 * w.batch * w.heads_q * pairs * (3 * w.dim_qk + 2 * w.dim_v)


def io_bytes(w):
    """q, k, v read and o written once (k and v of an fp8 cache a byte each)."""
    queries = w.batch * w.seq_q * w.heads_q * (w.dim_qk + w.dim_v)
    keys = w.batch * w.seq_kv * w.heads_kv * (w.dim_qk + w.dim_v)
    return queries * ELEMENT_BYTES[w.dtype] + keys * (1 if w.kv_fp8 else ELEMENT_BYTES[w.dtype])


def timing_fields(w, fwd_ms=None, bwd_ms=None):
    fields = {}
    if fwd_ms is not None:
        fields.update(fwd_ms=fwd_ms, fwd_tflops=forward_flops(w) / (fwd_ms * 1e9),
                      gbps=io_bytes(w) / (fwd_ms * 1e6))
    if bwd_ms is not None:
        fields.update(bwd_ms=bwd_ms, bwd_tflops=backward_flops(w) / (bwd_ms * 1e9))
    return fields


def summarize(result):
    """Per workload: flashgen's TFLOP/s, the best peer's, and the ratios.

    fwd: flashgen's forward; bwd: the deterministic backward; bwd_any: the
    backward with deterministic=False ("flashgen atomic"). Each against the
    fastest peer that ran the direction.
    """
    by_workload = {}
    for row in result["rows"]:
        if "fwd_wall_us" in row:
            continue
        by_workload.setdefault(row["workload"], {})[row["system"]] = row
    summary = []
    for name, systems in by_workload.items():
        line = {"workload": name}
        for direction, system, key in (("fwd", "flashgen", "fwd_tflops"), ("bwd", "flashgen", "bwd_tflops"),
                                       ("bwd_any", "flashgen atomic", "bwd_tflops")):
            ours = systems.get(system, {}).get(key)
            peers = [(row[key], peer) for peer, row in systems.items() if peer in PEERS and key in row]
            best = max(peers) if peers else None
            line[direction] = {"flashgen": ours, "peer": best[1] if best else None,
                               "peer_tflops": best[0] if best else None,
                               "ratio": ours / best[0] if ours and best else None}
        summary.append(line)
    return summary


FORWARD_FIELDS = ("fwd_ms", "fwd_tflops", "gbps", "error")
BACKWARD_FIELDS = ("bwd_ms", "bwd_tflops", "bwd_error")


def merge_results(results):
    """One result from several runs, in the suite's order: each workload's
    forward from the last run that timed its forward, its backward from
    the last that timed its backward, each with the peers of that run, so
    that every ratio still compares systems timed together."""
    def timed(result, name, key=None):
        """Whether the run has the workload (with `key`: timed it so)."""
        return any(row["workload"] == name and (key is None or key in row)
                   for row in result["rows"])

    names = {row["workload"] for result in results for row in result["rows"]}
    workloads, host = load_suite(DEFAULT_SUITE)
    suite = [w.name for w in workloads + host]
    order = [name for name in suite if name in names] + sorted(names - set(suite))
    rows = []
    for name in order:
        host_runs = [r for r in results if timed(r, name, "fwd_wall_us")]
        if host_runs:
            rows += [row for row in host_runs[-1]["rows"] if row["workload"] == name]
            continue
        by_system = {}
        for key, fields in (("fwd_tflops", FORWARD_FIELDS), ("bwd_tflops", BACKWARD_FIELDS)):
            # A direction no run timed: the rows of the last run that has the
            # workload (its systems' refusals).
            runs = [r for r in results if timed(r, name, key)] or [
                r for r in results if timed(r, name)]
            for row in runs[-1]["rows"] if runs else []:
                if row["workload"] != name:
                    continue
                merged = by_system.setdefault(row["system"], {
                    k: v for k, v in row.items() if k not in FORWARD_FIELDS + BACKWARD_FIELDS})
                merged.update({k: row[k] for k in fields if k in row})
        rows += by_system.values()
    merged = dict(results[-1])
    merged["rows"] = rows
    merged["sources"] = [{"device": r.get("device"), "date": r.get("date")} for r in results]
    return merged


def markdown_table(result):
    """The README's table: TFLOP/s of flashgen and the best peer, and ratios."""
    def cell(entry):
        if entry["flashgen"] is None:
            return "-"
        if entry["ratio"] is None:
            return f"{entry['flashgen']:.0f} | - | -"
        return f"{entry['flashgen']:.0f} | {DISPLAY[entry['peer']]} {entry['peer_tflops']:.0f} | {entry['ratio']:.2f}"
    lines = ["| workload | fwd flashgen | best peer | ratio | bwd flashgen | best peer | ratio "
             "| bwd (atomic) | best peer | ratio |", "|---" * 10 + "|"]
    for line in summarize(result):
        lines.append(f"| {line['workload']} | {cell(line['fwd'])} | {cell(line['bwd'])} | {cell(line['bwd_any'])} |")
    host = [row for row in result["rows"] if "fwd_wall_us" in row]
    if host:
        lines += ["", "| host workload | system | forward µs (wall) | forward + backward µs (wall) |",
                  "|---|---|---|---|"]
        for row in host:
            lines.append(f"| {row['workload']} | {DISPLAY.get(row['system'], row['system'])} "
                         f"| {row['fwd_wall_us']:.0f} | {row.get('fwd_bwd_wall_us', float('nan')):.0f} |")
    return "\n".join(lines)


def plot_ratios(result, path):
    """Each workload's ratio to the best peer, forward and both backwards."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    summary = summarize(result)
    names = [line["workload"] for line in summary]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(names) + 1.5))
    height = 0.27
    for offset, (direction, label, color) in enumerate((("fwd", "forward", "#d62728"),
                                                        ("bwd", "backward (deterministic)", "#1f77b4"),
                                                        ("bwd_any", "backward (atomic)", "#ff7f0e"))):
        values = [line[direction]["ratio"] or 0.0 for line in summary]
        ax.barh([i + (offset - 1) * height for i in range(len(names))], values, height, label=label, color=color)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("flashgen TFLOP/s / best peer's (same run)")
    ax.set_title(f"{result.get('device', '')}, {result.get('date', '')}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ----------------------------------------------------------------------------
# Systems and timing (PyTorch + CUDA)
# ----------------------------------------------------------------------------

def load_peers_module():
    """bench/peers.py: its timing, input rotation and error helpers."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_peers", BENCH_DIR / "peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_inputs(w, count, requires_grad=True):
    """count sets of {q, k, v, grad_out} in [batch, seq, heads, dim] storage."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "f32": torch.float32}[w.dtype]

    def tensor(seq, heads, dim, grad):
        return torch.randn((w.batch, seq, heads, dim), device="cuda", dtype=dtype).requires_grad_(grad)
    return [{"q": tensor(w.seq_q, w.heads_q, w.dim_qk, requires_grad),
             "k": tensor(w.seq_kv, w.heads_kv, w.dim_qk, requires_grad),
             "v": tensor(w.seq_kv, w.heads_kv, w.dim_v, requires_grad),
             "grad_out": tensor(w.seq_q, w.heads_q, w.dim_v, False)} for _ in range(count)]


def system_call(system, w):
    """attention(q, k, v) -> o, all [batch, seq, heads, dim], for one system."""
    if system.startswith("flashgen"):
        import flashgen
        deterministic = system == "flashgen"
        keywords = dict(window_size=w.window, softcap=w.softcap)
        if w.sinks:
            keywords["sinks"] = sink_logits(w)
        if w.varlen:
            return varlen_call(w, deterministic, keywords)
        if w.kv_cache:
            return kv_cache_call(w, keywords)
        if w.documents:
            keywords.update(mask_mod="doc[kv_idx] == doc[q_idx]", mask_tensors={"doc": document_ids(w)})
        if w.mask_every_pair:
            keywords.update(mask_mod="kv_idx >= 0")
        return lambda q, k, v: flashgen.attention(q, k, v, causal=w.causal, deterministic=deterministic,
                                                  **keywords)
    gqa = w.heads_q != w.heads_kv
    if w.mask_every_pair:
        raise NotImplementedError("a flashgen-only row: the price of its mask machinery")
    if (w.varlen and not w.documents) or w.kv_cache:
        raise NotImplementedError("a flashgen-only row: its dense twin has the peers")
    if system == "flex":
        return flex_call(w, gqa)
    if w.window != (-1, -1) or w.softcap > 0 or w.sinks:
        raise NotImplementedError("SDPA has no sliding window, soft cap or sinks")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[system]
    mask, is_causal = None, w.causal
    if w.documents:  # a boolean [seq_q, seq_kv] mask (equal lengths: top-left is bottom-right)
        doc = document_ids(w)
        mask = doc[:, None] == doc[None, :]
        if w.causal:
            mask &= torch.ones_like(mask).tril()
        is_causal = False
    elif w.causal and w.seq_q != w.seq_kv:  # SDPA's is_causal is top-left
        from torch.nn.attention.bias import causal_lower_right
        mask, is_causal = causal_lower_right(w.seq_q, w.seq_kv), False

    def call(q, k, v):
        with sdpa_kernel([backend]):
            o = scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=mask, is_causal=is_causal, enable_gqa=gqa)
        return o.transpose(1, 2)
    return call


def varlen_call(w, deterministic, keywords):
    """flashgen.attention_varlen on the batch's sequences packed one after
    another ([batch · seq, heads, dim] views of the same tensors), its output
    seen as [batch, seq, heads, dim] again. With documents, each batch
    entry's documents are the sequences (what the peers run as a document
    mask)."""
    import flashgen
    if w.documents:
        lengths = torch.tensor(list(w.documents) * w.batch, dtype=torch.int32)
        cu_q = cu_k = torch.cat([torch.zeros(1, dtype=torch.int32), lengths.cumsum(0, dtype=torch.int32)]).cuda()
        longest_q = longest_k = max(w.documents)
    else:
        cu_q = torch.arange(w.batch + 1, device="cuda", dtype=torch.int32) * w.seq_q
        cu_k = torch.arange(w.batch + 1, device="cuda", dtype=torch.int32) * w.seq_kv
        longest_q, longest_k = w.seq_q, w.seq_kv

    def call(q, k, v):
        o = flashgen.attention_varlen(q.reshape(-1, w.heads_q, w.dim_qk), k.reshape(-1, w.heads_kv, w.dim_qk),
                                      v.reshape(-1, w.heads_kv, w.dim_v), cu_q, cu_k, longest_q, longest_k,
                                      causal=w.causal, deterministic=deterministic, **keywords)
        return o.reshape(w.batch, w.seq_q, w.heads_q, w.dim_v)
    return call


def kv_cache_call(w, keywords):
    """flashgen.attention_with_kvcache with k and v as every sequence's full
    cache (cache_seqlens = seq_kv, nothing appended): contiguous, or seen as
    pages of page_size rows through a block table (each sequence's pages in
    order, so the keys are those of the plain call the check compares with)."""
    import flashgen
    seqlens = torch.full((w.batch,), w.seq_kv, dtype=torch.int32, device="cuda")
    table = None
    if w.page_size:
        pages = w.seq_kv // w.page_size
        table = torch.arange(w.batch * pages, dtype=torch.int32, device="cuda").reshape(w.batch, pages)

    stored = {}  # an fp8 workload's caches, converted once per input set

    def call(q, k, v):
        if w.kv_fp8:
            key = (k.data_ptr(), v.data_ptr())
            if key not in stored:
                stored[key] = (k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn))
            k, v = stored[key]
        if table is not None:
            k = k.view(-1, w.page_size, w.heads_kv, w.dim_qk)
            v = v.view(-1, w.page_size, w.heads_kv, w.dim_v)
        return flashgen.attention_with_kvcache(q, k, v, seqlens, block_table=table, causal=w.causal,
                                               **keywords)
    return call


def flex_call(w, gqa):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    torch._dynamo.reset()  # one compile per shape, never the eager fallback
    try:
        torch._functorch.config.donated_buffer = False  # the backward is replayed with retain_graph
    except AttributeError:
        pass
    if w.sinks:
        raise NotImplementedError("FlexAttention has no sinks")
    compiled = torch.compile(flex_attention, dynamic=False)
    block_mask = score_mod = None
    offset, (left, right) = w.seq_kv - w.seq_q, w.window
    doc = document_ids(w) if w.documents else None
    if w.causal or w.window != (-1, -1) or w.documents:
        def visible(b, h, q_idx, kv_idx):
            seen = kv_idx >= 0
            if doc is not None:
                seen = seen & (doc[kv_idx] == doc[q_idx])
            if w.causal:
                seen = seen & (kv_idx <= q_idx + offset)
            if left >= 0:
                seen = seen & (kv_idx >= q_idx + offset - left)
            if right >= 0:
                seen = seen & (kv_idx <= q_idx + offset + right)
            return seen
        block_mask = create_block_mask(visible, B=None, H=None, Q_LEN=w.seq_q, KV_LEN=w.seq_kv,
                                       device="cuda")
    if w.softcap > 0:
        cap = w.softcap

        def score_mod(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)

    def call(q, k, v):
        o = compiled(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=block_mask,
                     score_mod=score_mod, enable_gqa=gqa)
        return o.transpose(1, 2)
    return call


def document_ids(w):
    """int32 [seq_q]: the document of each position of a packed workload."""
    lengths = torch.tensor(w.documents, device="cuda")
    return torch.repeat_interleave(torch.arange(len(w.documents), device="cuda", dtype=torch.int32),
                                   lengths)


def sink_logits(w):
    """The sinks of a workload: fp32 [heads_q], spread over [-1, 2)."""
    return torch.linspace(-1.0, 2.0, w.heads_q + 1, device="cuda")[:-1].contiguous()


def checked_rows(w):
    """Query rows checked against fp32: the first, the last and a spread."""
    step = max(1, w.seq_q // CHECKED_ROWS)
    return sorted(set(range(0, w.seq_q, step)) | {w.seq_q - 1})


def check_against_fp32(w, inputs, o):
    """Raises when o's checked rows (batch 0, every head) differ from fp32."""
    rows = torch.tensor(checked_rows(w), device="cuda")
    q = inputs["q"][0, rows].float().transpose(0, 1)                 # [Hq, r, Dqk]
    group = w.heads_q // w.heads_kv
    stored = (lambda x: x.to(torch.float8_e4m3fn).float()) if w.kv_fp8 else (lambda x: x.float())
    k = stored(inputs["k"][0]).transpose(0, 1).repeat_interleave(group, 0)  # [Hq, Skv, Dqk]
    v = stored(inputs["v"][0]).transpose(0, 1).repeat_interleave(group, 0)
    s = q @ k.transpose(1, 2) / w.dim_qk ** 0.5
    if w.softcap > 0:
        s = w.softcap * torch.tanh(s / w.softcap)
    keys = torch.arange(w.seq_kv, device="cuda")[None, None, :]
    diagonal = rows[None, :, None] + (w.seq_kv - w.seq_q)
    left, right = w.window
    hidden = torch.zeros_like(s, dtype=torch.bool)
    if w.causal:
        hidden |= keys > diagonal
    if left >= 0:
        hidden |= keys < diagonal - left
    if right >= 0:
        hidden |= keys > diagonal + right
    if w.documents:
        doc = document_ids(w)
        hidden |= doc[None, None, :] != doc[rows][None, :, None]
    s = s.masked_fill(hidden, float("-inf"))
    if w.sinks:  # a column with the sink's logit and no value
        sink = sink_logits(w)[:, None, None].expand(-1, s.shape[1], 1)
        s = torch.cat([s, sink], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[:, :1])], dim=1)
    expected = torch.nan_to_num(torch.softmax(s, dim=-1)) @ v        # [Hq, r, Dv]
    got = o[0, rows].float().transpose(0, 1)
    error = float((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30))
    if not error <= AGREEMENT[w.dtype]:
        raise ArithmeticError(f"mismatch: max error {error:.3g} of max |o| against fp32 "
                              f"(allowed {AGREEMENT[w.dtype]})")


def measure(system, w, peers, args):
    """One row: forward and backward medians, or why the system refused."""
    row = {"workload": w.name, "system": system, "shape": w.shape()}
    sets = outputs = None
    try:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or peers.FALLBACK_L2_BYTES
        sets = make_inputs(w, peers.input_sets_needed(2 * io_bytes(w), l2))
        attention = system_call(system, w)
        started = time.perf_counter()
        check_against_fp32(w, sets[0], attention(sets[0]["q"], sets[0]["k"], sets[0]["v"]))
        row["first_call_s"] = time.perf_counter() - started  # compiles (flex, flashgen's NVRTC)
        if system != "flashgen atomic":  # its forward is flashgen's
            ms = peers.time_calls(lambda i: attention(sets[i]["q"], sets[i]["k"], sets[i]["v"]), len(sets),
                                  args.warmup, args.repeats, args.time_budget_s)
            row.update(timing_fields(w, fwd_ms=ms))
    except Exception as exc:  # refused shape, mismatch, out of memory: record and go on
        row["error"] = peers.one_line_error(exc)
    if "error" not in row and w.backward and not args.forward_only:
        try:
            outputs = [attention(s["q"], s["k"], s["v"]) for s in sets]

            def backward(i):
                s = sets[i]
                torch.autograd.grad(outputs[i], (s["q"], s["k"], s["v"]), s["grad_out"], retain_graph=True)
            ms = peers.time_calls(backward, len(sets), args.warmup, args.repeats, args.time_budget_s)
            row.update(timing_fields(w, bwd_ms=ms))
        except Exception as exc:
            row["bwd_error"] = peers.one_line_error(exc)
    sets = outputs = None
    peers.release()
    return row


def measure_host(system, w, peers):
    """Wall time per call on a problem whose GPU time is small."""
    from torch.nn.functional import scaled_dot_product_attention
    row = {"workload": w.name, "system": system, "shape": w.shape()}
    (plain,), (graded,) = make_inputs(w, 1, requires_grad=False), make_inputs(w, 1)
    if system == "flashgen":
        attention = system_call("flashgen", w)
    else:  # SDPA as a model calls it, its own backend choice
        def attention(q, k, v):
            return scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                is_causal=w.causal).transpose(1, 2)
    row["fwd_wall_us"] = peers.wall_us(lambda: attention(plain["q"], plain["k"], plain["v"]), HOST_CALLS)

    def step():
        o = attention(graded["q"], graded["k"], graded["v"])
        torch.autograd.grad(o, (graded["q"], graded["k"], graded["v"]), graded["grad_out"])
    row["fwd_bwd_wall_us"] = peers.wall_us(step, HOST_CALLS)
    return row


def run(args):
    peers = load_peers_module()
    import flashgen
    workloads, host = load_suite(args.suite, args.only)
    # "flashgen_atomic" for "flashgen atomic": a list without spaces for shells.
    systems = [name.strip().replace("_", " ") for name in args.systems.split(",") if name.strip()]
    for name in systems:
        if name not in SYSTEMS:
            raise SystemExit(f"--systems: '{name}' is not one of {','.join(SYSTEMS)}")
    result = {"tool": "workloads", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "flashgen": flashgen.version(),
              "date": datetime.date.today().isoformat(), "rows": []}
    if not args.skip_gemm:
        result["gemm_tflops"] = peers.measure_gemm_tflops()
    # "flashgen atomic" differs from "flashgen" in the backward only.
    jobs = [(w, s) for w in workloads for s in systems if w.backward or s != "flashgen atomic"]
    jobs += [] if args.skip_host else [(w, s) for w in host for s in ("flashgen", "sdpa")]
    for index, (w, system) in enumerate(jobs, start=1):
        row = measure_host(system, w, peers) if w in host else measure(system, w, peers, args)
        result["rows"].append(row)
        print(f"[{index}/{len(jobs)}] {progress_text(row)}", file=sys.stderr, flush=True)
        if args.json:  # as we go: a crash late in the run keeps the rest
            write_json(result, args.json)
    print(markdown_table(result))
    if args.plot:
        plot_ratios(result, args.plot)
    return result


def progress_text(row):
    head = f"{row['workload']} | {row['system']}:"
    if "fwd_wall_us" in row:
        return f"{head} forward {row['fwd_wall_us']:.0f} µs, forward+backward {row['fwd_bwd_wall_us']:.0f} µs (wall)"
    if "error" in row:
        return f"{head} {row['error']}"
    parts = ([f"fwd {row['fwd_tflops']:.0f} TFLOP/s ({row['fwd_ms']:.3f} ms, {row['gbps']:.0f} GB/s)"]
             if "fwd_tflops" in row else [])
    parts += [f"bwd {row['bwd_tflops']:.0f} TFLOP/s"] if "bwd_tflops" in row else [row.get("bwd_error", "")]
    return f"{head} {' / '.join(part for part in parts if part)}"


def write_json(result, path):
    pathlib.Path(path).write_text(json.dumps(result, indent=1) + "\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=str(DEFAULT_SUITE), help="workloads file (default bench/workloads.json)")
    parser.add_argument("--only", help="regex: run only the workloads whose name matches")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, of " + ",".join(s.replace(" ", "_") for s in SYSTEMS))
    parser.add_argument("--json", help="write the rows here (as they come)")
    parser.add_argument("--plot", help="PNG of each workload's ratio to the best peer")
    parser.add_argument("--report", nargs="+", metavar="FILE",
                        help="no run: print the table (and --plot) of these JSON files (each "
                             "workload's forward and backward from the last file that timed them)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--time-budget-s", type=float, default=1.0, help="per timing: stop repeating after this")
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--skip-host", action="store_true", help="without the host-overhead rows")
    parser.add_argument("--skip-gemm", action="store_true", help="without the bf16 GEMM ceiling measurement")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        result = merge_results([json.loads(pathlib.Path(f).read_text()) for f in args.report])
        print(markdown_table(result))
        if args.plot:
            plot_ratios(result, args.plot)
        return
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("bench/workloads.py needs PyTorch and a CUDA GPU (--report works without)")
    run(args)


if __name__ == "__main__":
    main()
