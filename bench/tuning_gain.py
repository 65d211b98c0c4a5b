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
                               [--adopt-defaults data/tuning/sm90.json]

--adopt-defaults rewrites, in that table, the exact rows (every dtype, the
sequence bucket holding the runs' N) of each kernel the tables made slower
beyond the tolerance (fwd, bq, bkv, atomic) to the default's tuning as the
untuned run names it, with the untuned run's rate: the rule the tuner keeps
("a winner must beat the default") applied to rows a later default overtook.
"""

import argparse
import datetime
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


def load_run(path):
    with open(path) as f:
        return json.load(f)


def rows_by_dim(data, causal):
    """flashgen's rows of one run, by head dimension (one mask)."""
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


# The table kind (and kernel name) of each label, and the rate its rows record.
ADOPTABLE = {
    "fwd": ("forward", "fwd_tflops"),
    "bq": ("backward_query", "bwd_tflops"),
    "bkv": ("backward_key_value", "bwd_tflops"),
    "atomic": ("backward_atomic", "bwd_atomic_tflops"),
}


def kernel_tuning(row, kind):
    """The tuning text of `kind` in a bench row's kernel list ("spec | tuning")."""
    for name in row.get("kernels", []):
        spec, _, tuning = name.partition(" | ")
        if spec.split(" ")[0] == kind:
            return tuning
    return None


def adopt_defaults(table_path, losses, default_rows, causal, device, driver):
    """Rewrites the rows behind `losses` to the defaults; returns what changed.

    The table keeps one row per line; only the rewritten lines change.
    """
    gpu = device.split(" (")[0]  # "NVIDIA H200 (sm_90a)" -> the tables' "NVIDIA H200"
    targets = {}
    for dim, label, _, _, _ in losses:
        if label in ADOPTABLE:
            kind, rate_field = ADOPTABLE[label]
            tuning = kernel_tuning(default_rows[dim], kind)
            if tuning is not None:
                targets[(kind, dim)] = (tuning, round(default_rows[dim][rate_field], 1),
                                        default_rows[dim]["N"])
    with open(table_path) as f:
        lines = f.read().split("\n")
    changed = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith('{"kind"'):
            continue
        comma = text.endswith(",")
        row = json.loads(text.rstrip(","))
        dim = row["dim_qk_min"]
        target = targets.get((row["kind"], dim))
        if (target is None or row["causal"] != causal or row["dim_qk_max"] != dim or
                row["dim_v_min"] != dim or row["dim_v_max"] != dim or
                not row["seq_min"] <= target[2] <= row["seq_max"]):
            continue
        tuning, rate, _ = target
        if row["tuning"] == tuning:
            continue  # the same kernel: the loss was noise
        changed.append(f"{row['kind']} {row['dtype']} D={dim}: {row['tuning']} -> {tuning}")
        row.update(tuning=tuning, tflops=rate, default_tflops=rate,
                   date=datetime.date.today().isoformat(), driver=driver, gpu=gpu,
                   note=f"the default: measured faster than {row['tuning']} in sweeps with "
                        f"and without the tables")
        indent = line[:len(line) - len(line.lstrip())]
        lines[i] = indent + json.dumps(row) + ("," if comma else "")
    with open(table_path, "w") as f:
        f.write("\n".join(lines))
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tuned", help="flashgen bench JSON with the tuning tables")
    parser.add_argument("default", help="flashgen bench JSON with FLASHGEN_TUNING_TABLES=off")
    parser.add_argument("--tolerance", type=float, default=5.0,
                        help="losses up to this many percent count as noise (default 5)")
    parser.add_argument("--causal", action="store_true", help="compare the causal rows")
    parser.add_argument("--adopt-defaults", metavar="TABLE",
                        help="rewrite TABLE's rows behind the losses to the defaults")
    args = parser.parse_args(argv)

    default_run = load_run(args.default)
    default_rows = rows_by_dim(default_run, args.causal)
    table, losses = compare(rows_by_dim(load_run(args.tuned), args.causal), default_rows,
                            args.tolerance)
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
        if args.adopt_defaults:
            changed = adopt_defaults(args.adopt_defaults, losses, default_rows, args.causal,
                                     default_run.get("device", ""), default_run.get("driver", ""))
            print(f"\nrows set to the default in {args.adopt_defaults}:")
            for line in changed:
                print("  " + line)
        return 1
    print(f"\nno head dimension is slower with the tables (beyond {args.tolerance:g}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
