#!/usr/bin/env bash
# Times this tree against another source tree of flashgen on the same GPU in
# one run: builds the other tree's CLI, then runs `flashgen bench` with both,
# alternating (other, this, other, this) so that clock or thermal drift
# falls on both alike; prints each row's ratio this / other from the medians.
#
#   bash bench/compare_builds.sh OTHER_SOURCE OUT_DIR [bench options...]
#
# OTHER_SOURCE: a source tree (e.g. `git archive <commit> | tar -x -C dir`).
# The JSON of each run goes to OUT_DIR/{other,this}_{1,2}.json; the bench
# options default to --dims 64,128,256,384,512,127 --kinds
# forward,backward,backward_atomic. This tree's CLI must be built in build-gpu.
# Each tree's own CLI times it: the trees from ee2152e up to c3bbccc (not
# included) also timed 100 more calls per measurement for the host time,
# several times the GPU work of the timed calls, which slows a compute-bound
# point by a few percent against a tree that does not; compare such a tree
# only with another of that span.
set -euo pipefail
other=$1 out=$2
shift 2
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--dims 64,128,256,384,512,127 --kinds forward,backward,backward_atomic)
cd "$(dirname "$0")/.."
mkdir -p "$out"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S "$other" -B /tmp/flashgen-other-build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DFLASHGEN_BUILD_TESTS=OFF >/dev/null
cmake --build /tmp/flashgen-other-build --parallel "$(nproc)" --target flashgen_cli >/dev/null
for round in 1 2; do
  /tmp/flashgen-other-build/flashgen bench --backend cuda "${options[@]}" --json "$out/other_$round.json" >/dev/null
  build-gpu/flashgen bench --backend cuda "${options[@]}" --json "$out/this_$round.json" >/dev/null
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def rows(name):
    runs = [json.load(open(f"{out}/{name}_{r}.json")) for r in (1, 2)]
    table = {}
    for run in runs:
        for row in run["rows"]:
            for key, value in row.items():
                if key.endswith("_ms") and isinstance(value, (int, float)):
                    table.setdefault((row["D"], row["causal"], key), []).append(value)
    return table
other, this = rows("other"), rows("this")
print(f"{'D':>5} {'':>6} {'time':>14} {'other ms':>10} {'this ms':>10} {'this/other':>10}  (median of both rounds)")
for key in sorted(other):
    if key in this:
        o, t = statistics.median(other[key]), statistics.median(this[key])
        print(f"{key[0]:>5} {'causal' if key[1] else '':>6} {key[2]:>14} {o:10.3f} {t:10.3f} {t / o:10.3f}")
PY
