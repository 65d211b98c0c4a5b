#!/usr/bin/env python3
"""Plots attention throughput against head dimension from benchmark JSON files.

Reads any number of files written by `flashgen bench --json` or
bench/peers.py --json (format: {"device", "gemm_tflops"?, "rows": [{"backend",
"D", "N", "B", "H", "causal", "dtype", "fwd_tflops", "bwd_tflops", ...} or
with "error"]}) and draws one PNG with two panels, forward and backward:
TFLOP/s against D, one line per system, refused shapes absent, the bf16 GEMM
ceiling dashed. flashgen rows may carry "bwd_atomic_tflops" (backward with
dQ accumulated by atomics), drawn as its own system.

  python3 bench/plot.py results/*.json -o sweep.png
  python3 bench/plot.py results/*.json --table > table.md
"""

import argparse
import collections
import json
import sys

# Display name and drawing style per system, in legend order. flashgen is
# drawn on top and thicker: it is what the plot is about.
SYSTEMS = collections.OrderedDict([
    ("flashgen", {"label": "flashgen", "color": "#d62728", "marker": "o", "width": 2.4, "z": 5}),
    ("flashgen_atomic", {"label": "flashgen (atomic dQ)", "color": "#ff7f0e", "marker": "D", "width": 1.8, "z": 4}),
    ("cudnn", {"label": "cuDNN (SDPA)", "color": "#2ca02c", "marker": "s", "width": 1.5, "z": 3}),
    ("flash", {"label": "FA2 (SDPA FLASH)", "color": "#1f77b4", "marker": "^", "width": 1.5, "z": 3}),
    ("flex", {"label": "FlexAttention", "color": "#9467bd", "marker": "v", "width": 1.5, "z": 3}),
    ("efficient", {"label": "SDPA EFFICIENT", "color": "#7f7f7f", "marker": "x", "width": 1.5, "z": 3}),
])
OTHER_STYLE = {"color": None, "marker": ".", "width": 1.5, "z": 2}

DIRECTIONS = ("fwd", "bwd")
DIRECTION_TITLES = {"fwd": "forward", "bwd": "backward (dQ, dK, dV)"}

# D = 256 is the largest head dimension FA2 and cuDNN accept.
PEER_LIMIT_D = 256
# Head dimensions off this grid (127, 199, 257, 385: rows that are not
# 8-byte aligned, just past a kernel limit) are drawn as open markers, not
# joined to the line: they are spot checks, and joining them would turn every
# line into a zigzag.
LINE_GRID_D = 4
TABLE_DIMS = (40, 64, 127, 128, 199, 256, 257, 384, 385, 512)

DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "f16": "fp16", "half": "fp16", "float16": "fp16", "torch.float16": "fp16",
    "fp32": "fp32", "f32": "fp32", "float": "fp32", "float32": "fp32", "torch.float32": "fp32",
}
CEILING_KEYS = ("gemm_tflops", "gemm_bf16_tflops")

FIGURE_SIZE_IN = (14, 6)
FIGURE_DPI = 150
X_TICKS = (16, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 448, 512)
# Head room above the highest point or ceiling so labels do not touch the frame.
Y_HEADROOM = 1.15


# ----------------------------------------------------------------------------
# Loading and normalising
# ----------------------------------------------------------------------------

def normalise_dtype(name):
    """'torch.bfloat16' / 'bfloat16' / 'BF16' -> 'bf16'; None stays None."""
    if name is None:
        return None
    key = str(name).strip().lower()
    return DTYPE_ALIASES.get(key, key)


def load_results(paths):
    """[{"path", "device", "ceiling", "rows"}] with dtypes normalised."""
    results = []
    for path in paths:
        with open(path) as source:
            data = json.load(source)
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError(f"{path}: expected an object with a 'rows' list")
        rows = []
        for index, row in enumerate(data["rows"]):
            for key in ("backend", "D"):
                if key not in row:
                    raise ValueError(f"{path}: row {index} has no '{key}'")
            row = dict(row)
            row["dtype"] = normalise_dtype(row.get("dtype"))
            rows.append(row)
        ceiling = next((data[key] for key in CEILING_KEYS if data.get(key)), None)
        results.append({"path": path, "device": data.get("device"), "ceiling": ceiling, "rows": rows})
    return results


def shape_key(row):
    return (row.get("B"), row.get("H"), row.get("N"), bool(row.get("causal", False)))


def select_shape(results, causal=False):
    """The (B, H, N, causal) shape most rows share; the plot shows only it."""
    counts = collections.Counter(shape_key(row) for result in results for row in result["rows"]
                                 if bool(row.get("causal", False)) == causal)
    if not counts:
        raise ValueError("no %s rows in the input files" % ("causal" if causal else "non-causal"))
    return counts.most_common(1)[0][0]


def select_dtype(results, shape):
    counts = collections.Counter(row["dtype"] for result in results for row in result["rows"]
                                 if shape_key(row) == shape and row["dtype"] is not None)
    return counts.most_common(1)[0][0] if counts else None


def collect_series(results, shape=None, dtype=None):
    """{system: {D: {"fwd": TFLOP/s, "bwd": TFLOP/s}}} for one shape and dtype.

    Refused shapes (rows with "error") contribute nothing, as does a missing
    direction ("bwd_error"). Rows without a dtype (older files) match any.
    A later file's value for the same system, D and direction replaces an
    earlier one; a measured value wins over a refusal from another file.
    """
    series = collections.OrderedDict()
    for result in results:
        for row in result["rows"]:
            if shape is not None and shape_key(row) != shape:
                continue
            if dtype is not None and row["dtype"] not in (None, dtype):
                continue
            system = row["backend"]
            values = series.setdefault(system, {}).setdefault(row["D"], {})
            if "error" in row:
                if not any(direction in values for direction in DIRECTIONS):
                    values["refused"] = True
                continue
            for direction in DIRECTIONS:
                if row.get(f"{direction}_tflops") is not None:
                    values[direction] = row[f"{direction}_tflops"]
                    values.pop("refused", None)
            if row.get("bwd_atomic_tflops") is not None:
                atomic = series.setdefault("flashgen_atomic" if system == "flashgen" else system + "_atomic", {})
                atomic.setdefault(row["D"], {})["bwd"] = row["bwd_atomic_tflops"]
    return order_systems(series)


def order_systems(series):
    known = [name for name in SYSTEMS if name in series]
    others = sorted(name for name in series if name not in SYSTEMS)
    return collections.OrderedDict((name, series[name]) for name in known + others)


def system_label(system):
    return SYSTEMS.get(system, {}).get("label", system)


def find_ceiling(results, override=None):
    if override is not None:
        return override
    return next((result["ceiling"] for result in results if result["ceiling"]), None)


def describe_shape(shape, dtype):
    batch, heads, seq, causal = shape
    parts = [dtype or "?", f"B={batch}", f"H={heads}", f"N={seq}", "causal" if causal else "non-causal"]
    return ", ".join(parts)


def find_device(results):
    devices = sorted({result["device"] for result in results if result["device"]})
    # "NVIDIA H200" (peers) and "NVIDIA H200 (sm_90a)" (flashgen) are one GPU.
    devices = [d for d in devices if not any(e.startswith(d + " (") for e in devices)]
    return " / ".join(devices) if devices else "unknown device"


# ----------------------------------------------------------------------------
# Markdown table
# ----------------------------------------------------------------------------

def format_cell(values, system):
    """'fwd/bwd' rounded TFLOP/s; '-' refused; 'n/a' not measured."""
    if values is None:
        return "n/a"
    if values.get("refused"):
        return "-"
    directions = ("bwd",) if system.endswith("_atomic") else DIRECTIONS
    parts = []
    for direction in directions:
        value = values.get(direction)
        parts.append("-" if value is None else f"{value:.0f}")
    return "/".join(parts)


def best_system(series, dim, direction):
    candidates = [(values[direction], system) for system, by_dim in series.items()
                  for d, values in by_dim.items() if d == dim and values.get(direction) is not None]
    if not candidates:
        return "-"
    value, system = max(candidates)
    return f"{system_label(system)}: {value:.0f}"


def markdown_table(series, dims=TABLE_DIMS, caption=None):
    systems = list(series)
    lines = []
    if caption:
        lines += [caption, ""]
    header = ["D"] + [system_label(s) + (", bwd" if s.endswith("_atomic") else "") for s in systems]
    header += ["best fwd", "best bwd"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for dim in dims:
        cells = [str(dim)] + [format_cell(series[s].get(dim), s) for s in systems]
        cells += [best_system(series, dim, "fwd"), best_system(series, dim, "bwd")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------
# Figure
# ----------------------------------------------------------------------------

def draw(series, output, title, ceiling=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=FIGURE_SIZE_IN, sharey=True)
    highest = ceiling or 0.0
    off_grid_dims = set()
    for axis, direction in zip(axes, DIRECTIONS):
        for system, by_dim in series.items():
            points = sorted((d, v[direction]) for d, v in by_dim.items() if v.get(direction) is not None)
            if not points:
                continue
            style = SYSTEMS.get(system, OTHER_STYLE)
            highest = max(highest, max(value for _, value in points))
            on_grid = [p for p in points if p[0] % LINE_GRID_D == 0]
            off_grid = [p for p in points if p[0] % LINE_GRID_D != 0]
            off_grid_dims.update(d for d, _ in off_grid)
            line = None
            if on_grid:
                line, = axis.plot(*zip(*on_grid), label=system_label(system), color=style["color"],
                                  marker=style["marker"], linewidth=style["width"], markersize=4,
                                  zorder=style["z"])
            if off_grid:
                color = line.get_color() if line else style["color"]
                axis.plot(*zip(*off_grid), label=None if line else system_label(system), color=color,
                          marker=style["marker"], markerfacecolor="white", markeredgewidth=1.5,
                          markersize=7, linestyle="none", zorder=style["z"] + 1)
        if ceiling:
            axis.axhline(ceiling, color="black", linestyle="--", linewidth=1.2,
                         label=f"bf16 GEMM ceiling ({ceiling:.0f} TFLOP/s)", zorder=1)
        axis.axvline(PEER_LIMIT_D, color="0.45", linestyle=":", linewidth=1.2, zorder=1)
        axis.text(PEER_LIMIT_D + 4, 0.975, f"FA2 / cuDNN limit (D = {PEER_LIMIT_D})", color="0.3",
                  fontsize=8, va="top", ha="left", transform=axis.get_xaxis_transform())
        axis.set_title(DIRECTION_TITLES[direction], fontsize=12)
        axis.set_xlabel("head dimension D")
        axis.set_xlim(0, max(X_TICKS) + 16)
        axis.set_xticks(X_TICKS)
        axis.tick_params(axis="x", labelsize=8)
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (FlashAttention FLOP count)")
    axes[0].set_ylim(0, highest * Y_HEADROOM if highest else 1)
    if ceiling:
        right = axes[1].secondary_yaxis("right", functions=(lambda t: 100.0 * t / ceiling,
                                                            lambda p: p * ceiling / 100.0))
        right.set_ylabel("% of bf16 GEMM ceiling")

    # One legend for both panels, below them, so it never covers a line.
    # Systems in SYSTEMS order (the atomic variant may appear only in the
    # backward panel), then the reference lines.
    handles = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    system_labels = [system_label(system) for system in series]
    labels = [label for label in system_labels if label in handles]
    labels += [label for label in handles if label not in system_labels]
    if off_grid_dims:
        from matplotlib.lines import Line2D
        label = "open markers: D = " + ", ".join(map(str, sorted(off_grid_dims)))
        handles[label] = Line2D([], [], color="0.3", marker="o", markerfacecolor="white",
                                markeredgewidth=1.5, linestyle="none")
        labels.append(label)
    figure.legend([handles[label] for label in labels], labels, loc="lower center",
                  ncol=min(len(labels), 4), frameon=False, fontsize=10)
    figure.suptitle(title, fontsize=13)
    legend_rows = -(-len(labels) // 4)
    figure.tight_layout(rect=(0, 0.05 + 0.045 * legend_rows, 1, 1))
    figure.savefig(output, dpi=FIGURE_DPI)
    plt.close(figure)


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Plot TFLOP/s against head dimension from benchmark JSON files.")
    parser.add_argument("inputs", nargs="+", help="JSON files from flashgen bench / bench/peers.py")
    parser.add_argument("-o", "--output", help="PNG to write")
    parser.add_argument("--table", action="store_true", help="print a markdown table to stdout")
    parser.add_argument("--table-dims", default=",".join(map(str, TABLE_DIMS)),
                        help="head dimensions of the table rows")
    parser.add_argument("--causal", action="store_true", help="show the causal rows (default: non-causal)")
    parser.add_argument("--ceiling", type=float, help="GEMM ceiling in TFLOP/s (default: from the inputs)")
    parser.add_argument("--title", help="figure title (default: device and shape)")
    args = parser.parse_args(argv)
    if not args.output and not args.table:
        parser.error("nothing to do: give -o FILE.png and/or --table")
    try:
        args.table_dims = [int(d) for d in args.table_dims.split(",") if d.strip()]
    except ValueError:
        parser.error("--table-dims: expected comma-separated integers")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        results = load_results(args.inputs)
        shape = select_shape(results, args.causal)
    except (OSError, ValueError) as exc:
        sys.exit(f"plot.py: {exc}")
    dtype = select_dtype(results, shape)
    skipped = sum(1 for result in results for row in result["rows"] if shape_key(row) != shape)
    if skipped:
        print(f"plot.py: showing {describe_shape(shape, dtype)}; {skipped} rows of other shapes left out",
              file=sys.stderr)
    series = collect_series(results, shape, dtype)
    description = f"{find_device(results)}: {describe_shape(shape, dtype)}"
    if args.table:
        caption = f"TFLOP/s forward/backward, {description}. \"-\" = refused by the system, n/a = not measured."
        sys.stdout.write(markdown_table(series, args.table_dims, caption))
    if args.output:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit("plot.py: needs matplotlib (python3 -m pip install matplotlib)")
        title = args.title or f"Attention throughput vs head dimension — {description}"
        draw(series, args.output, title, find_ceiling(results, args.ceiling))
        print(f"plot.py: wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
