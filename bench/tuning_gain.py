#!/usr/bin/env python3
"""What the tuning tables gain over the untuned defaults, per head dimension and kind.

Reads two `flashgen bench --json` files of the same shapes: one with the
tuning tables (the default) and one without them
(`FLASHGEN_TUNING_TABLES=off flashgen bench ...`), and prints per D the
TFLOP/s of each with the gain, forward, backward, atomic backward and the
deterministic backward's two kernels alone. Rows where the tables lose more
than --tolerance (timing noise) are listed at the end; the exit code is 1
when there are any. Two sweeps of the same code on the H200 differed by up
to 4% forward and 8% for a backward kernel timed alone at one D, hence the
default of 5%.

  python3 bench/tuning_gain.py TUNED.json DEFAULT.json [--tolerance 5] [--causal]
"""

import argparse
import json
import sys

# (label, JSON field) of each timed kind.
KINDS = [
    ("fwd", "fwd_tflops"),
    ("bwd", "bwd_tflops"),
    ("atomic", "bwd_atomic_tflops"),
    ("bq", "bq_tflops"),
    ("bkv", "bkv_tflops"),
]


def rows_by_dim(path, causal):
    """flashgen's rows of one file, by head dimension (one mask)."""
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for row in data.get("rows", []):
        if row.get("backend") != "flashgen" or bool(row.get("causal")) != causal:
            continue
        rows[int(row["D"])] = row
    return rows


def compare(tuned, default, tolerance):
    """Per D present in both: [(D, [(label, tuned, default, gain %) ...])] and the losses."""
    table, losses = [], []
    for dim in sorted(set(tuned) & set(default)):
        cells = []
        for label, field in KINDS:
            a, b = tuned[dim].get(field), default[dim].get(field)
            if a is None or b is None or b <= 0:
                continue
            gain = 100.0 * (a / b - 1.0)
            cells.append((label, a, b, gain))
            if gain < -tolerance:
                losses.append((dim, label, a, b, gain))
        table.append((dim, cells))
    return table, losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tuned", help="flashgen bench JSON with the tuning tables")
    parser.add_argument("default", help="flashgen bench JSON with FLASHGEN_TUNING_TABLES=off")
    parser.add_argument("--tolerance", type=float, default=5.0,
                        help="losses up to this many percent count as noise (default 5)")
    parser.add_argument("--causal", action="store_true", help="compare the causal rows")
    args = parser.parse_args(argv)

    table, losses = compare(rows_by_dim(args.tuned, args.causal),
                            rows_by_dim(args.default, args.causal), args.tolerance)
    if not table:
        print("tuning_gain.py: no head dimension is in both files", file=sys.stderr)
        return 2
    print("TFLOP/s tuned / default (gain %)")
    for dim, cells in table:
        text = "  ".join(f"{label} {a:6.1f}/{b:6.1f} ({gain:+5.1f}%)" for label, a, b, gain in cells)
        print(f"D={dim:<4} {text}")
    if losses:
        print(f"\nslower with the tables (beyond {args.tolerance:g}%):")
        for dim, label, a, b, gain in losses:
            print(f"  D={dim} {label}: {a:.1f} against {b:.1f} ({gain:+.1f}%)")
        return 1
    print(f"\nno head dimension is slower with the tables (beyond {args.tolerance:g}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
